"""The note on the warp-specialised prefill's IR form (kernels/nvidia/wgmma_ws_ir_plan.py) held
against the code base: every template feature listed, the configurations the dispatch runs at
the measured shapes named in the note, and each missing piece's probe of the code base."""

from __future__ import annotations

import dataclasses

import pytest

import kernels.nvidia.wgmma_ws_ir_plan as plan
from kernels.nvidia.wgmma_attention_ws import WsFlashConfig


def test_every_config_field_is_a_listed_template_feature():
    fields = {f.name for f in dataclasses.fields(WsFlashConfig)}
    assert fields == set(plan.TEMPLATE_FEATURES), fields ^ set(plan.TEMPLATE_FEATURES)


def test_the_dispatched_configurations_are_the_ones_the_note_names():
    cfgs = plan.dispatched_d128_configs("bf16")
    assert set(cfgs) == {s[0] for s in plan.MEASURED_SHAPES}
    names = {c.name for c in cfgs.values()}
    assert names == {"lg_wsflash_bf16_d128_128x192_s2_pp_tma",
                     "lg_wsflash_bf16_d128_128x128_s2_pp_causal_tma_dw",
                     "lg_wsflash_bf16_d128_128x128_s3_pp_tma",
                     "lg_wsflash_bf16_d128_128x128_s3_pp_causal_tma_pt_uh4"}
    for n in names:     # the docstring's table spells them with the dtype as "*"
        assert n.replace("bf16", "*") in plan.__doc__, n


def test_missing_pieces_follow_the_configuration_and_the_probes(monkeypatch):
    cfgs = plan.dispatched_d128_configs()
    # landed: the builder of the dispatched configurations (kernels/nvidia/wgmma_ws_ir.py)
    # with the deferred P V wait and the ping-pong; the persistent units (wgmma_ws_ir_persist)
    base = set()
    assert set(plan.missing_pieces(cfgs["B8 H32 S8K"])) == base
    assert set(plan.missing_pieces(cfgs["B8 H32 S8K causal"])) == base
    assert set(plan.missing_pieces(cfgs["B16 H32 S512 causal"])) == base
    for c in cfgs.values():        # the builder takes each without ping-pong / persistence
        bare = dataclasses.replace(c, pingpong=False, persistent=False, unit_heads=0)
        assert plan.missing_pieces(bare) == ()
    # landed: the two-consumer builder (wgmma_flash_ir, warpgroups=2 at d128), the
    # cross-warpgroup named barriers (NamedBarrier(arrive=...), the per-role model's rule) and
    # the 4-D tensor maps (TmaLoad.coords: model, printer, printed checks)
    assert {"two_consumers", "pingpong_barriers", "tma_4d"}.isdisjoint(
        plan.missing_pieces(cfgs["B8 H32 S8K"]))
    # landed: the engine (kernels.verify.attention_ring) with the ping-pong
    # (kernels.verify.ring_pingpong), and the printed text of its kernel checked
    # (kernels.verify.printed_ws)
    assert {"engine", "engine_pingpong", "printed_text"}.isdisjoint(
        plan.missing_pieces(cfgs["B8 H32 S8K"]))
    # landed: the host's 4-D tensor maps of an IR kernel and its launcher (wgmma_ws_ir_launch)
    assert "host_maps_4d" not in plan.missing_pieces(cfgs["B8 H32 S8K"])
    # the cp.async producer without ping-pong needs neither 4-D maps nor named barriers, but
    # the builder has only the TMA producer
    bare = WsFlashConfig(head_dim=128, stages=2, pingpong=False)
    assert set(plan.missing_pieces(bare)) == {"unbuilt_features"}
    assert set(plan.missing_pieces(dataclasses.replace(cfgs["B8 H32 S8K"], pingpong=False,
                                                       rescale_vote=True))) == \
        {"unbuilt_features"}
    # a piece whose probe turns False is missing again
    pieces = tuple(dataclasses.replace(p, probe=lambda: False) if p.name == "engine_pingpong"
                   else p for p in plan.PIECES)
    monkeypatch.setattr(plan, "PIECES", pieces)
    assert set(plan.missing_pieces(cfgs["B8 H32 S8K"])) == {"engine_pingpong"}


@pytest.mark.parametrize("name", ["tma_4d", "pingpong_barriers", "two_consumers", "engine",
                                  "engine_pingpong", "printed_text", "host_maps_4d",
                                  "builder", "deferred_pv_wait", "persistent_units",
                                  "unbuilt_features", "cp_producer", "d256_consumers",
                                  "cp_overlap"])
def test_capability_probes_read_the_code_base(name):
    """The probes that inspect code (not a planned module's name) say what is there today."""
    probe = {p.name: p.probe for p in plan.PIECES}[name]
    assert probe() is (name in ("two_consumers", "pingpong_barriers", "tma_4d", "engine",
                                "engine_pingpong", "printed_text", "host_maps_4d", "builder",
                                "deferred_pv_wait", "cp_producer", "d256_consumers",
                                "persistent_units", "cp_overlap"))


def test_the_d256_configuration_needs_the_cp_producer_pieces(monkeypatch):
    """The dispatched d256 configuration (cp.async producer, bn 64, ping-pong, deferred wait):
    nothing is missing since the overlap builder takes the cp.async producer (``cp_overlap``);
    with the cp.async producer's, the d256 tile's or the overlap form's probe False they are
    named, and the d128 TMA configurations need none of them."""
    from kernels.nvidia.prefill_select import WS_PREFILL_TILES
    cfg = WsFlashConfig(head_dim=256, **WS_PREFILL_TILES[256])
    assert cfg.loader == "cp.async"
    assert plan.missing_pieces(cfg) == ()
    names = ("cp_producer", "d256_consumers", "cp_overlap")
    pieces = tuple(dataclasses.replace(p, probe=lambda: False)
                   if p.name in names else p for p in plan.PIECES)
    monkeypatch.setattr(plan, "PIECES", pieces)
    assert set(plan.missing_pieces(cfg)) == set(names)
    tma = WsFlashConfig(head_dim=128, loader="tma")
    assert not set(names) & set(plan.missing_pieces(tma))
    # the d128 cp.async fallback (tensors TMA cannot address) is still the builder's to learn
    assert "unbuilt_features" in plan.missing_pieces(WsFlashConfig(head_dim=128, stages=2))


def test_the_cp_producer_probe_fails_when_the_text_check_fails(monkeypatch):
    """The probe runs the printed-text checks: a printer dropping the noinc arrive helper's
    .noinc turns it False."""
    import kernels.printer.cuda_attention as ca
    real = ca.emit_cuda_attention
    monkeypatch.setattr(ca, "emit_cuda_attention", lambda k: real(k).replace(
        "arrive.noinc.shared", "arrive.shared"))
    plan._cp_producer.cache_clear()
    try:
        assert plan._cp_producer() is False
    finally:
        plan._cp_producer.cache_clear()


def test_the_host_maps_probe_fails_when_the_reading_is_wrong(monkeypatch):
    """The probe reads a map: a reading whose strides are not the tensor's (planted: head and
    batch swapped) turns it False, and so does a module that is not there."""
    import kernels.nvidia.ws_tma_loads as wl
    real = wl.ir_attention_map_args

    def swapped(tm, t, sizes):
        a = dict(real(tm, t, sizes))
        a["strides"] = (a["strides"][0], a["strides"][2], a["strides"][1])
        return a
    monkeypatch.setattr(wl, "ir_attention_map_args", swapped)
    assert plan._host_maps_4d() is False
    monkeypatch.setattr(wl, "ir_attention_map_args", real)
    assert plan._host_maps_4d() is True
    monkeypatch.setattr(plan, "_module", lambda name: lambda: False)
    assert plan._host_maps_4d() is False


def test_the_builder_probes_ask_the_builder(monkeypatch):
    """The builder's probes turn with what ws_ir_supported says (a feature it learns flips
    its piece), not with the module's existence."""
    import kernels.nvidia.wgmma_ws_ir as ir
    pieces = {p.name: p.probe for p in plan.PIECES}
    monkeypatch.setattr(ir, "ws_ir_supported", lambda c: None)
    assert pieces["persistent_units"]() and pieces["unbuilt_features"]()
    assert pieces["cp_overlap"]()
    monkeypatch.setattr(ir, "ws_ir_supported", lambda c: "no" if c.loader != "tma" else None)
    assert not pieces["cp_overlap"]() and not pieces["unbuilt_features"]()
    monkeypatch.setattr(ir, "ws_ir_supported", lambda c: "no" if c.defer_pv_wait else None)
    assert not pieces["deferred_pv_wait"]() and pieces["builder"]()


def test_the_printed_text_probe_fails_when_a_check_fails(monkeypatch):
    """The probe runs the checks: a printer whose text the checks refuse turns it False."""
    import kernels.printer.cuda_attention as ca
    real = ca.emit_cuda_attention
    monkeypatch.setattr(ca, "emit_cuda_attention", lambda k: real(k).replace(
        "lg_setmaxnreg_inc<240>", "lg_setmaxnreg_inc<232>"))
    plan._ws_printed_text.cache_clear()
    try:
        assert plan._ws_printed_text() is False
    finally:
        plan._ws_printed_text.cache_clear()
