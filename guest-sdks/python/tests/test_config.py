"""Settings over a fake wasi:config/store."""

from dataclasses import dataclass

import pytest

from tally import Unavailable, _bindings, config


@dataclass
class Error_Upstream:
    value: str


def test_get_passes_the_key_and_returns_the_value(fake):
    store = fake("config", get="http://127.0.0.1:9000/sink")
    assert config.get("upstream") == "http://127.0.0.1:9000/sink"
    assert store.calls == [("get", ("upstream",))]


def test_a_missing_setting_is_none(fake):
    fake("config", get=None)
    assert config.get("missing") is None


def test_get_all_is_a_dict(fake):
    fake("config", get_all=[("a", "1"), ("b", "2")])
    assert config.get_all() == {"a": "1", "b": "2"}


def test_an_error_of_the_store_is_unavailable(fake):
    fake("config", get=_bindings.Err(Error_Upstream("vault is down")), get_all=_bindings.Err(Error_Upstream("x")))
    with pytest.raises(Unavailable, match=r"the settings could not be read \(upstream\): vault is down"):
        config.get("k")
    with pytest.raises(Unavailable):
        config.get_all()


def test_a_key_must_be_text():
    with pytest.raises(TypeError):
        config.get(b"k")


def test_outside_a_component_the_store_is_unavailable():
    with pytest.raises(_bindings.HostUnavailable, match="wasi:config/store.get"):
        config.get("k")
