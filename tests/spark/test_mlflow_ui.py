"""The MLflow UI shows the cluster's metrics: a cluster started with ``mlflow=True`` inside
``mlflow.start_run()`` (the session's Spark, a real ``mlflow server``: the
``mlflow_server`` fixture), its run opened in headless chromium on that server's UI. The
run page's "Model metrics" tab (``#/experiments/<id>/runs/<run id>/model-metrics``, the
route and tab of mlflow's UI bundle) must draw the chart of ``dask/workers`` (its card,
named after the metric, with a Plotly SVG whose line has a point per sample), and the
screenshot must be a PNG with a drawn chart in it, not a blank page. The picture in
docs/user-guide.md (``docs/assets/mlflow-run-metrics.png``) is such a screenshot."""

from __future__ import annotations

import asyncio
import time

import dask
import pytest

import spark_dask
from tests.support.extras import needs
from tests.support.processes import wait_until
from tests.support.web import Chromium, chromium_or_skip

# The run page's chart cards: each card's text (its title, the metric's last name part, and
# its legend, "<run name> (<metric>)"), its Plotly SVGs and the points of its line.
CARDS_JS = r"""
(() => [...document.querySelectorAll('[data-testid="experiment-view-compare-runs-card"]')].map(card => {
  const box = card.getBoundingClientRect();
  return {
    text: card.innerText,
    svgs: card.querySelectorAll('svg.main-svg').length,
    points: card.querySelectorAll('.scatterlayer .points path').length,
    line: [...card.querySelectorAll('.scatterlayer path.js-line')].map(p => (p.getAttribute('d') || '').length),
    box: {x: box.x, y: box.y, width: box.width, height: box.height},
  };
}))()
"""


def _workers_card(cards: list[dict]) -> dict | None:
    """The card of ``dask/workers`` (not ``dask/workers/<group>``): its legend names the
    metric whole."""
    found = [c for c in cards or [] if "(dask/workers)" in c["text"]]
    return found[0] if found else None


async def _show(chromium: str, url: str, shot: str, samples: int) -> dict:
    """Open the run's metrics tab; wait (bounded) for the ``dask/workers`` chart to draw a
    point per sample; close the MLflow Assistant's panel (open on a first visit), bring the
    chart into view; the screenshot."""
    workers_card = f"{CARDS_JS}.filter(c => c.text.includes('(dask/workers)'))[0]"
    async with Chromium(chromium, width=1400, height=1350) as browser:  # the dask section whole
        await browser.open(url)
        drawn = (
            f"(() => {{ const c = {workers_card}; return !!c && c.points >= {samples} && c.line.some(n => n > 0); }})()"
        )
        await browser.wait_for(drawn, timeout=60)
        first = await browser.evaluate(CARDS_JS)  # the cards in view at first (the others are drawn when in view)
        await browser.evaluate("document.querySelector('button[aria-label=\"Close\"]')?.click()")
        await browser.evaluate(
            "[...document.querySelectorAll('[data-testid=\"experiment-view-compare-runs-card\"]')]"
            ".find(c => c.innerText.includes('(dask/workers)')).scrollIntoView({block: 'nearest'})"
        )
        in_view = (
            f"(() => {{ const b = {workers_card}.box; return b.y >= 0 && b.y + b.height <= window.innerHeight; }})()"
        )
        await browser.wait_for(in_view, timeout=10)
        cards = await browser.evaluate(CARDS_JS)
        await browser.screenshot(shot)
        return {
            "cards": cards,
            "first": first,
            "errors": browser.record.errors,
            "text": await browser.evaluate("document.body.innerText"),
        }


def _painted(png: str, box: dict) -> tuple[int, float]:
    """In the screenshot's region ``box`` (CSS pixels = image pixels: scale factor 1): how many
    colours, and which share of the pixels is not the page's white."""
    from PIL import Image  # matplotlib's dependency (the docs extra)

    with Image.open(png) as image:
        region = image.convert("RGB").crop(
            (int(box["x"]), int(box["y"]), int(box["x"] + box["width"]), int(box["y"] + box["height"]))
        )
        data = region.tobytes()
    pixels = [data[i : i + 3] for i in range(0, len(data), 3)]
    inked = sum(1 for p in pixels if min(p) < 200)
    return len(set(pixels)), inked / max(len(pixels), 1)


@pytest.mark.timeout(400)
def test_the_ui_draws_the_clusters_workers_chart(spark, mlflow_server, tmp_path):
    # here, not at import: the 3.5 lane (no mlflow extra) collects this module and deselects it
    mlflow = needs("mlflow", "mlflow")
    chromium = chromium_or_skip()
    mlflow.set_tracking_uri(mlflow_server.uri)
    try:
        experiment = mlflow.set_experiment("spark-dask-ui")
        client = mlflow.MlflowClient()
        with mlflow.start_run(run_name="spark-dask-ui") as run:
            run_id = run.info.run_id
            with dask.config.set({"spark-dask.mlflow-interval": "1s"}):
                with spark_dask.start(spark, n_workers=2, mlflow=True) as dask_client:
                    # two seconds of tasks, so the samples see tasks processing and queued
                    dask_client.gather(dask_client.map(time.sleep, [0.25] * 16, pure=False))
                    # the wait "three samples of dask/workers logged", at most 60 s
                    assert wait_until(lambda: len(client.get_metric_history(run_id, "dask/workers")) >= 3, timeout=60)
        history = client.get_metric_history(run_id, "dask/workers")
    finally:
        mlflow.set_tracking_uri(None)
    assert [m.value for m in history][-1] == 2, history

    url = f"{mlflow_server.uri}/#/experiments/{experiment.experiment_id}/runs/{run_id}/model-metrics"
    shot = str(tmp_path / "mlflow-run-metrics.png")
    seen = asyncio.run(_show(chromium, url, shot, samples=3))
    card = _workers_card(seen["cards"])
    assert card is not None, f"no dask/workers chart on {url}: {seen['text'][:2000]}"
    assert "workers" in card["text"].splitlines()[0], card  # the card's title: the metric's name in its section
    assert card["svgs"] >= 1 and card["points"] >= 3 and any(card["line"]), card
    assert {c["text"].splitlines()[0] for c in seen["first"] if c["text"]} >= {"memory_bytes"}, seen["first"]

    colours, inked = _painted(shot, card["box"])
    assert colours > 20 and 0.01 < inked < 0.6, (colours, inked, shot)
    assert not [e for e in seen["errors"] if "exception" in e], seen["errors"]
