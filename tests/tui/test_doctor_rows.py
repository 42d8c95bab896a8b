"""The smoke tab shows doctor's findings for a host whose smoke tests failed."""

from __future__ import annotations

from gpunode import events as ev
from gpunode.tui.app import GpunodeApp
from gpunode.tui.smoke_view import SmokeView
from tests.tui import scenario as sc

XID = "gpu-a kernel: NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus."


async def test_doctor_findings_follow_the_smoke_results() -> None:
    app = GpunodeApp(hosts=sc.HOSTS, clock=sc.clock)
    async with app.run_test(size=(150, 40)) as pilot:
        for e in sc.smoke_events():
            app.post_event(e)
        title = "Xid 79 on 0000:00:06: GPU has fallen off the bus"
        app.post_event(ev.DoctorFinding("gpu-a", "gpu.xid", "error", title, XID, "reboot"))
        await pilot.press("3")
        await pilot.pause(0.3)
        sv = app.query_one(SmokeView)
        row = "gpu-a/doctor/0"
        assert row in sv.rows()
        assert sv.rows().index(row) > sv.rows().index("gpu-a/nccl-allreduce")
        assert (sv.cell_text(row, 2), sv.cell_text(row, 3)) == ("gpu.xid", "error")
        assert XID in sv.cell_text(row, 7) and sv.cell_text(row, 7).endswith("fix: reboot")
