"""The progress display of a tuning run: a tqdm bar where tqdm is installed (notebooks
included), plain lines on stderr otherwise."""

import sys
import time


def _latency(us):
    if us <= 0:
        return "n/a"
    return f"{us / 1000:.3f} ms" if us >= 1000 else f"{us:.1f} us"


class ProgressDisplay:
    """Budget spent (seconds, or trials when the budget is in trials), what is tuned ("18
    tasks", an operator) and the network's estimated latency (an operator's best), after
    each round."""

    def __init__(self, budget_seconds, trials, tasks, stream=None, latency="estimated"):
        self.by_trials = trials > 0
        self.total = trials if self.by_trials else budget_seconds
        self.tasks = tasks
        self.latency = latency
        self.stream = stream or sys.stderr
        self.bar = None
        self.last_line = 0.0
        try:
            from tqdm.auto import tqdm
        except ImportError:
            tqdm = None
        if tqdm is not None:
            unit = "trial" if self.by_trials else "s"
            fmt = "{l_bar}{bar}| {n:.0f}/{total:.0f} " + unit + " [{elapsed}<{remaining}{postfix}]"
            self.bar = tqdm(total=self.total, desc=f"basin: {tasks}", bar_format=fmt, file=self.stream)

    def update(self, p):
        done = p["trials"] if self.by_trials else min(p["seconds"], self.total)
        text = f"{p['trials']} trials, {self.latency} {_latency(p['estimated_latency_us'])}"
        if self.bar is not None:
            self.bar.n = done
            self.bar.set_postfix_str(text, refresh=False)
            self.bar.refresh()
            return
        now = time.monotonic()
        if now - self.last_line < 5 and done < self.total:
            return
        self.last_line = now
        spent = f"{done}/{self.total} trials" if self.by_trials else f"{done:.0f}/{self.total:.0f} s"
        print(f"basin: {spent}, {self.tasks}, {text}", file=self.stream, flush=True)

    def write(self, line, log):
        if self.bar is not None:
            self.bar.clear()
        log(line)
        if self.bar is not None:
            self.bar.refresh()

    def close(self):
        if self.bar is not None:
            self.bar.close()
