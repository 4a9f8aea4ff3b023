"""The one size parser (spark_dask.sizes) and each caller's reading of a size, pinned."""

import doctest

import pytest

from spark_dask import rapids, sizes
from spark_dask.plan import PlanError
from spark_dask.sizes import BYTES, MIB, human_bytes, parse_size
from spark_dask.spark.session import _memory

GiB = 2**30


def test_doctests_of_the_sizes_module():
    assert doctest.testmod(sizes).failed == 0


@pytest.mark.parametrize(
    "text,bare,binary,expected",
    [
        ("10GB", BYTES, False, 10 * 10**9),
        ("10GB", BYTES, True, 10 * GiB),
        ("10GiB", BYTES, False, 10 * GiB),
        ("10g", BYTES, False, 10 * 10**9),
        ("10gi", BYTES, False, 10 * GiB),
        ("512", BYTES, True, 512),
        ("512", MIB, True, 512 * MIB),
        ("512b", MIB, True, 512),
        ("B", BYTES, False, 1),
        (" 1 k ", BYTES, False, 1000),
        (7, MIB, False, 7),
        (2.5, BYTES, False, 2),
    ],
)
def test_parse_size(text, bare, binary, expected):
    assert parse_size(text, bare, binary=binary) == expected


@pytest.mark.parametrize("text", ["lots", "10 XB", "ib", "1gbi", True, "1e"])
def test_parse_size_refuses(text):
    with pytest.raises(ValueError):
        parse_size(text)


# session: Spark's memory settings, a bare number in MiB, binary units, PlanError otherwise
@pytest.mark.parametrize(
    "text,expected",
    [
        (None, GiB),  # the default "1g"
        ("", GiB),
        ("4g", 4 * GiB),
        ("4G", 4 * GiB),
        (" 512m ", 512 * MIB),
        ("2gb", 2 * GiB),
        ("512", 512 * MIB),
        ("0.5", MIB // 2),
        ("100b", 100),
        ("1.5g", int(1.5 * GiB)),
        ("1t", 2**40),
        ("1p", 2**50),
        ("3k", 3 * 1024),
    ],
)
def test_session_reads_spark_memory(text, expected):
    assert _memory(text) == expected


@pytest.mark.parametrize("text", ["lots", "1 x", "4 gigs"])
def test_session_memory_errors_name_the_setting(text):
    with pytest.raises(PlanError, match="cannot read the Spark memory setting"):
        _memory(text)


# rapids: the plugin's sizes, a bare number in bytes, binary units, the default otherwise
@pytest.mark.parametrize(
    "text,expected",
    [
        (None, -1),
        ("", -1),
        ("  ", -1),
        ("640m", 640 * MIB),
        ("1g", GiB),
        ("1G", GiB),
        ("1gb", GiB),
        ("1gib", GiB),
        ("1024", 1024),
        ("1.5k", 1536),
        ("2t", 2 * 2**40),
        ("x", -1),
        ("m1", -1),
    ],
)
def test_rapids_reads_plugin_sizes(text, expected):
    assert rapids._bytes(text, -1) == expected


# rapids.parse_size: as Dask reads a size (decimal units unless "i"), a bare number is bytes
@pytest.mark.parametrize(
    "text,expected",
    [("10GB", 10 * 10**9), ("1 GiB", GiB), ("1e6", 10**6), (512, 512), ("5000M", 5 * 10**9), ("2Gi", 2 * GiB)],
)
def test_rapids_parse_size_reads_as_dask(text, expected):
    assert rapids.parse_size(text) == expected


@pytest.mark.parametrize("text", [True, "10 XB", "lots"])
def test_rapids_parse_size_refuses(text):
    with pytest.raises(ValueError):
        rapids.parse_size(text)


def test_human_bytes_is_the_formatter():
    assert human_bytes(10**12) == "931 GiB"
    assert human_bytes(1536 * MIB) == "1.5 GiB"
    assert human_bytes(512) == "512 B"
    assert human_bytes(100 * GiB) == "100 GiB"
