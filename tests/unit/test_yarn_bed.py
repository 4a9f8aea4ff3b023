"""The YARN bed's configuration (tests/support/yarn.py), without starting it: what the
daemons and clients read, the RM's two JSON shapes, the daemons' jars."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from tests.support.yarn import (
    RM_ADDRESSES,
    DaemonExited,
    YarnBed,
    conf_files,
    core_site,
    daemon_class_path,
    ephemeral_ports,
    free_ports,
    hadoop_version,
    nm_site,
    node_id,
    node_list,
    site_xml,
    yarn_site,
)


def _props(text: str) -> dict[str, str]:
    root = ET.fromstring(text)
    return {p.findtext("name"): p.findtext("value") for p in root.iter("property")}


def test_site_xml_round_trips():
    props = {"a.b": "1", "yarn.nodemanager.aux-services": ""}
    assert _props(site_xml(props)) == {"a.b": "1", "yarn.nodemanager.aux-services": ""}


def test_yarn_site_names_the_ports_and_keeps_files_in_the_bed(tmp_path):
    ports = {name: 40000 + i for i, name in enumerate(RM_ADDRESSES)}
    yarn = yarn_site(str(tmp_path), ports)
    assert yarn["yarn.resourcemanager.webapp.address"] == "127.0.0.1:40004"
    assert yarn["yarn.node-attribute.fs-store.root-dir"] == f"file://{tmp_path}/rm/node-attribute"
    assert yarn["yarn.nodemanager.log.retain-seconds"] == "1"
    assert yarn["yarn.nodemanager.aux-services"] == ""
    assert yarn["yarn.nodemanager.container-executor.class"].endswith(".DefaultContainerExecutor")
    nm = nm_site(yarn, f"{tmp_path}/nm0")
    assert all(nm[f"yarn.nodemanager.{d}"].startswith(f"{tmp_path}/nm0/") for d in ("local-dirs", "log-dirs"))


def test_only_the_daemons_conf_has_log4j_and_the_scheduler():
    client = conf_files(core_site("/t"), {}, daemon=False)
    daemon = conf_files(core_site("/t"), {}, daemon=True)
    assert sorted(client) == ["core-site.xml", "yarn-site.xml"]
    assert sorted(daemon) == ["capacity-scheduler.xml", "core-site.xml", "log4j2.properties", "yarn-site.xml"]
    capacity = _props(daemon["capacity-scheduler.xml"])
    assert capacity["yarn.scheduler.capacity.maximum-am-resource-percent"] == "0.5"
    # a bed's capacity settings go to the scheduler's file, over its defaults
    key = "yarn.scheduler.capacity.resource-calculator"
    mine = conf_files(core_site("/t"), {key: "Dominant", "yarn.resource-types": "g"}, daemon=True)
    assert _props(mine["capacity-scheduler.xml"])[key] == "Dominant"
    assert _props(mine["yarn-site.xml"]) == {"yarn.resource-types": "g"}


def test_node_list_reads_both_json_shapes():
    nodes = [{"state": "RUNNING"}]
    assert node_list({"nodes": {"node": nodes}}) == nodes
    assert node_list({"nodes": nodes}) == nodes
    assert node_list({"nodes": None}) == [] and node_list(None) == []
    assert node_id({"id": "h:1"}) == node_id({"nodeId": "h:1"}) == "h:1"


def test_the_daemons_take_a_few_jars_of_pyspark(tmp_path):
    for name in ("hadoop-client-api-3.3.4.jar", "hadoop-client-runtime-3.3.4.jar", "jersey-server-2.40.jar"):
        (tmp_path / name).write_bytes(b"")
    assert hadoop_version(str(tmp_path)) == "3.3.4"
    assert hadoop_version(str(tmp_path / "none")) is None
    cp = daemon_class_path("/conf", str(tmp_path), ["/m.jar"]).split(":")
    assert cp[:2] == ["/conf", "/m.jar"] and "jersey" not in ":".join(cp)
    assert sorted(p.rsplit("/", 1)[1] for p in cp[2:]) == [
        "hadoop-client-api-3.3.4.jar",
        "hadoop-client-runtime-3.3.4.jar",
    ]


def test_spark_conf_keeps_the_application_on_loopback(tmp_path):
    conf = YarnBed(str(tmp_path), {}, "/jars", "/jdk").spark_conf(executors=3, cores=1, python="/py")
    assert conf["spark.master"] == "yarn" and conf["spark.submit.deployMode"] == "client"
    assert conf["spark.yarn.jars"].startswith("local:") and conf["spark.yarn.jars"].endswith("/jars/*")
    assert conf["spark.driver.host"] == "127.0.0.1" and conf["spark.executor.instances"] == "3"
    assert conf["spark.pyspark.python"] == "/py"


def test_free_ports_are_distinct_and_below_the_kernels_range():
    ports = free_ports(5)
    assert len(set(ports)) == 5
    assert all(1024 <= p < ephemeral_ports()[0] for p in ports)


def test_a_dead_daemon_says_why_and_whether_a_port_was_taken(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "rm.log").write_text(
        "".join(f"12:00:00.000 INFO ResourceManager: step {i}\n" for i in range(100))
        + "12:00:01.000 ERROR ResourceManager: Error starting ResourceManager\n"
        + "java.net.BindException: Problem binding to [localhost:23456] java.net.BindException: Address already in use\n"
        + "".join(f"12:00:02.000 INFO ResourceManager: after {i}\n" for i in range(30))
    )
    (logs / "nm0.out").write_text("INFO: Registering org.apache.hadoop.yarn.webapp.GenericExceptionHandler\n")
    bound = DaemonExited(str(tmp_path), ["rm"])
    assert bound.bind_failed
    text = str(bound)
    assert "Address already in use" in text and "after 29" in text and "step 0" not in text
    other = DaemonExited(str(tmp_path), ["nm0"])
    assert not other.bind_failed and "GenericExceptionHandler" in str(other)
