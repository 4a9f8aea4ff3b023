"""What the tests share that is not a fixture (the fixtures and pytest hooks are in
``tests/conftest.py``): Spark sessions (:mod:`.spark`), process checks and waits
(:mod:`.processes`), fake GPUs and a fake dask-cuda (:mod:`.gpus`), the multi-host
cluster (:mod:`.hosts`, :mod:`.multihost`), Maven Central jars (:mod:`.jars`), a
browser and proxies (:mod:`.web`), an MLflow tracking server (:mod:`.mlflow_server`), the examples (:mod:`.examples`), the Node.js
programs (:mod:`.node`), Delta tables (:mod:`.delta_tables`), task specifications and
stand-ins (:mod:`.task_specs`), test extras (:mod:`.extras`) and the repository's root
(:mod:`.paths`)."""
