"""Ctrl-C during tuning: the run stops cleanly (KeyboardInterrupt once it has), the
records keep every program measured, and a second run resumes from them."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from conftest import TINY_CNN

SCRIPT = textwrap.dedent("""
    import sys, basin
    model = basin.Model.load(sys.argv[1])
    def progress(p):
        print("round", p["trials"], flush=True)
    try:
        model.tune("120s", records=sys.argv[2], strategy="random", first_batch=2, progress=progress)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    print("finished", flush=True)
""")


def test_sigint_stops_tuning_cleanly_and_the_run_resumes(tmp_path):
    records = tmp_path / "r.db"
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, TINY_CNN, str(records)], stdout=subprocess.PIPE, text=True,
                         env=os.environ.copy())
    lines = []
    for line in p.stdout:  # the first rounds ran: programs are in the records
        lines.append(line.strip())
        if len(lines) == 3:
            break
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    lines += out.split()
    assert p.returncode == 3, lines
    assert "interrupted" in lines and "finished" not in lines
    assert time.monotonic() - t0 < 30  # stopped within a program or two, not at the budget's end

    import basin
    model = basin.Model.load(TINY_CNN)
    measured = int(lines[2].split()[1])
    report = model.tune(trials=measured + 2, records=records, strategy="random", progress=False)
    assert report.resumed >= measured  # nothing measured before the interrupt was lost
    assert report.measured == report.trials - report.resumed
