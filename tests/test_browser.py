"""The student's side in a real browser: the transformer_block release notebook, filled in, opened in
JupyterLab 4 and run cell by cell through JupyterLab's own menus in headless Chromium (Debian's
/usr/bin/chromium, driven by Playwright; nothing here downloads a browser).

One JupyterLab server and one browser serve the whole module.  Two notebooks are opened in it: the reference
solution, and the reference with one catalogue mistake (eps outside the square root of layer norm), whose
visible check fails with a message that names the bug.  The tests read what a student sees in the page:
execution counts, the check cells' printed lines and tracebacks, the two plots as loaded images.  Then the
real `nbgrader validate` passes the first and fails the second, and the feedback page that
`python -m autograder grade --html` writes for the second opens in the same browser with every picture loaded.
Screenshots land in each test's tmp_path; their paths are printed (run with -s to see them).

`image_widths(browser_context, path)` opens any local HTML file in the shared browser and returns the
naturalWidth of each of its <img> elements: what a test of another HTML page needs.
"""
from __future__ import annotations

import base64
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from autograder.authoring.assignment import Assignment, nbgrader_meta, source_text
from autograder.authoring.catalogue import REFERENCE, load
from autograder.authoring.samples import write_notebook
from conftest import ASSIGNMENT, REPO, processes_mentioning, run_cli

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
MISSING_CHROMIUM = (f"{CHROMIUM} is missing: the browser tests drive Debian's chromium and never download one. "
                    "Install it with `apt-get install chromium` (or `make browser`, which `make test` runs).")
VIEWPORT = {"width": 1280, "height": 900}
TALLEST_SCREENSHOT = 16000  # px; Chromium refuses larger captures

# the one-bug student: one catalogue mistake, in layer_norm, whose visible check names the bug
MISTAKE = "ln-eps-outside-sqrt"
MISTAKE_PART = "layer_norm"
MISTAKE_MESSAGE = "with eps=0.5 the result differs from PyTorch: is eps added to the variance inside the sqrt?"
PLOTS = ("heads_plot", "gradient_plot", "placement_plot")

NOTEBOOK_READY = 120_000  # ms: JupyterLab's first page load parses megabytes of JavaScript on a busy machine
RUN_TIMEOUT = 120_000     # ms for one run of the notebook's cells


# --- what the release notebook says a student must see -------------------------------------------------------

@dataclass(frozen=True)
class CellSpec:
    index: int            # position among all cells of the notebook (as in the DOM)
    cell_type: str
    grade_id: str | None
    first_line: str       # of its source, to check that the DOM cell is this cell
    pass_line: str | None  # "Part N: all visible checks passed." (or "Part Nb: ...") for a check cell


def cell_specs(notebook: dict) -> list[CellSpec]:
    specs = []
    for index, cell in enumerate(notebook["cells"]):
        source = source_text(cell)
        meta = nbgrader_meta(cell)
        printed = re.findall(r'print\("(Part \d+[a-z]?: all visible checks passed\.)"\)', source) if meta.get("grade") else []
        specs.append(CellSpec(index, cell["cell_type"], meta.get("grade_id"),
                              source.strip().split("\n")[0].strip(), printed[-1] if printed else None))
    return specs


# --- the JupyterLab server ------------------------------------------------------------------------------------

@dataclass
class Lab:
    url: str
    token: str
    root: Path
    runtime: Path
    process: subprocess.Popen
    log: Path

    def api(self, path: str, method: str = "GET") -> object:
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         headers={"Authorization": f"token {self.token}"})
        with DIRECT.open(request, timeout=10) as reply:
            body = reply.read()
        return json.loads(body) if body else None

    def notebook_url(self, name: str) -> str:
        # a workspace per notebook, reset, so that nothing of one notebook's layout is restored with another
        return f"{self.url}/lab/workspaces/{Path(name).stem}/tree/{name}?token={self.token}&reset"


DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # localhost: never through a proxy


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def stop_lab(lab: Lab) -> None:
    """SIGTERM to the server's process group (the server shuts its kernels down), SIGKILL if it lingers;
    then any kernel of this server still alive (kernels run in sessions of their own) is killed by its pid."""
    for kernel in _kernels(lab):
        try:
            lab.api(f"/api/kernels/{kernel['id']}", method="DELETE")
        except OSError:
            pass
    for sig, grace in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        try:
            os.killpg(lab.process.pid, sig)
        except ProcessLookupError:
            break
        try:
            lab.process.wait(grace)
            break
        except subprocess.TimeoutExpired:
            continue
    for line in processes_mentioning(str(lab.runtime)):  # kernels' command lines name their connection file
        try:
            os.kill(int(line.split(":")[0]), signal.SIGKILL)
        except ProcessLookupError:
            pass


def _kernels(lab: Lab) -> list[dict]:
    try:
        return list(lab.api("/api/kernels"))
    except OSError:
        return []


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory) -> dict[str, Path]:
    """The folder JupyterLab serves: the reference solution and the one-bug notebook."""
    folder = tmp_path_factory.mktemp("lab-root")
    catalogue = load(ASSIGNMENT)
    return {"solved": write_notebook(catalogue.notebook(REFERENCE), folder / "solved.ipynb"),
            "one_bug": write_notebook(catalogue.notebook(catalogue.entry(MISTAKE)), folder / "one_bug.ipynb")}


@pytest.fixture(scope="module")
def lab(notebooks, tmp_path_factory):
    """JupyterLab 4 on 127.0.0.1, a free port and a random token, serving the notebooks' folder, with its
    settings, workspaces, configuration and runtime files in temporary folders of its own."""
    state = tmp_path_factory.mktemp("lab-state")
    runtime = state / "runtime"
    settings = state / "settings" / "@jupyterlab" / "apputils-extension"
    settings.mkdir(parents=True)
    # no news or update toast over the notebook, and no request to the Internet for them
    (settings / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False}), encoding="utf-8")
    for folder in (runtime, state / "workspaces", state / "config"):
        folder.mkdir()
    token = os.urandom(16).hex()
    port = free_port()
    env = {**os.environ, "JUPYTERLAB_SETTINGS_DIR": str(state / "settings"),
           "JUPYTERLAB_WORKSPACES_DIR": str(state / "workspaces"), "JUPYTER_CONFIG_DIR": str(state / "config"),
           "JUPYTER_RUNTIME_DIR": str(runtime),
           "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])}
    env.pop("MPLBACKEND", None)  # the kernel's inline backend draws the plots into the page
    root = notebooks["solved"].parent
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--ServerApp.port_retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root}"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = state / "jupyterlab.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=sink, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    server = Lab(f"http://127.0.0.1:{port}", token, root, runtime, process, log)
    try:
        started = time.monotonic()
        while True:
            if process.poll() is not None:
                pytest.fail(f"JupyterLab exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                server.api("/api/status")
                break
            except (OSError, urllib.error.URLError):
                if time.monotonic() - started > 120:
                    pytest.fail(f"JupyterLab did not answer within 120 s:\n{log.read_text()[-3000:]}")
                time.sleep(0.5)
        print(f"\nJupyterLab up in {time.monotonic() - started:.1f} s at {server.url} (log {log})")
        yield server
    finally:
        stop_lab(server)
        assert process.poll() is not None, "JupyterLab is still running"


# --- the browser ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser_context(tmp_path_factory):
    """Headless Debian chromium with a fresh profile, shared by the module's tests (pages of one context
    share the HTTP cache, so JupyterLab's scripts are fetched once)."""
    if not CHROMIUM.exists():
        pytest.fail(MISSING_CHROMIUM, pytrace=False)
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True, viewport=VIEWPORT)
        try:
            yield context
        finally:
            context.close()


def image_widths(context, page_file: Path, screenshot: Path | None = None, requested: list[str] | None = None,
                 timeout_ms: float = 30_000) -> list[int]:
    """Opens a local HTML file in the shared browser, waits until every <img> has finished loading (or
    failed to), and returns each image's naturalWidth in document order (0 for one that did not load).
    Optionally saves a full-page screenshot, and appends every URL the page requested to `requested`."""
    page = context.new_page()
    if requested is not None:
        page.on("request", lambda request: requested.append(request.url))
    try:
        page.goto(page_file.resolve().as_uri(), wait_until="load")
        page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=timeout_ms)
        if screenshot is not None:
            page.screenshot(path=screenshot, full_page=True)
        return page.evaluate("() => Array.from(document.images).map(i => i.naturalWidth)")
    finally:
        page.close()


# --- a student in JupyterLab ----------------------------------------------------------------------------------

CELLS = ".jp-NotebookPanel .jp-WindowedPanel-viewport > .jp-Cell"  # the notebook's cells, in order

# every cell as the page shows it: its prompt, its editor's text, its outputs and their images.  textContent,
# not innerText: JupyterLab skips drawing the cells out of view (CSS content-visibility), and Chromium's
# innerText of a skipped cell is empty.
SNAPSHOT_JS = """
(cells) => Array.from(document.querySelectorAll(cells)).map(cell => ({
  code: cell.classList.contains('jp-CodeCell'),
  prompt: (cell.querySelector('.jp-InputArea-prompt')?.textContent || '').trim(),
  source: cell.querySelector('.jp-InputArea-editor .cm-content')?.textContent || '',
  outputs: Array.from(cell.querySelectorAll('.jp-OutputArea-output')).map(o => ({
    mime: o.getAttribute('data-mime-type') || '', text: o.textContent || ''})),
  images: Array.from(cell.querySelectorAll('.jp-OutputArea-output img')).map(i => ({
    complete: i.complete, naturalWidth: i.naturalWidth, naturalHeight: i.naturalHeight})),
}))
"""
KERNEL_IDLE_JS = "(document.querySelector('#jp-main-statusbar')?.innerText || '').includes('| Idle')"
# the notebook is in the page with all its cells (JupyterLab adds them in batches), and its kernel is idle
READY_JS = f"([cells, count]) => document.querySelectorAll(cells).length === count && {KERNEL_IDLE_JS}"
# the kernel is idle, no cell is queued or running ([*]), and cell number `index` shows an execution count
# other than `before`
SETTLED_JS = f"""
([cells, index, before]) => {{
  const all = Array.from(document.querySelectorAll(cells));
  const prompt = c => (c?.querySelector('.jp-InputArea-prompt')?.textContent || '').trim();
  return {KERNEL_IDLE_JS} && !all.some(c => c.classList.contains('jp-CodeCell') && prompt(c).includes('*'))
         && /^\\[\\d+\\]:$/.test(prompt(all[index])) && prompt(all[index]) !== before;
}}
"""
IMAGES_LOADED_JS = """() => Array.from(document.querySelectorAll('.jp-NotebookPanel .jp-OutputArea-output img'))
                                 .every(i => i.complete)"""
EXECUTED = re.compile(r"^\[\d+\]:$")


@dataclass
class Run:
    """One notebook opened and run by a student in JupyterLab."""
    name: str
    page: object
    specs: list[CellSpec]
    cells: list[dict]  # SNAPSHOT_JS after the last run
    load_seconds: float
    run_seconds: list[float] = field(default_factory=list)  # Run All, then each Run Selected Cell and All Below
    stops: list[str] = field(default_factory=list)  # grade_id of each cell after which a run stopped

    def index(self, grade_id: str) -> int:
        [index] = [s.index for s in self.specs if s.grade_id == grade_id]
        return index

    def cell(self, grade_id: str) -> dict:
        return self.cells[self.index(grade_id)]

    def locator(self, grade_id: str):
        return self.page.locator(CELLS).nth(self.index(grade_id))

    def check_cells(self) -> list[CellSpec]:
        return [s for s in self.specs if s.pass_line]


def wait_for(page, js: str, arg, timeout_ms: float, what: str) -> None:
    """page.wait_for_function, failing with what the page shows when it times out."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    try:
        page.wait_for_function(js, arg=arg, timeout=timeout_ms, polling=250)
    except PlaywrightTimeout:
        status = page.evaluate("() => document.querySelector('#jp-main-statusbar')?.innerText || ''")
        prompts = [c["prompt"] for c in snapshot(page) if c["code"]]
        pytest.fail(f"{what}: not within {timeout_ms / 1000:.0f} s; status bar {status!r}, prompts {prompts}")


def menu(page, top: str, item: str) -> None:
    """Clicks a menu of JupyterLab's menu bar, then one of its (enabled) items, by their labels."""
    page.locator(".lm-MenuBar-item", has=page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(
        f"^{re.escape(top)}$"))).click()
    page.locator(".lm-Menu-item:not(.lm-mod-disabled)", has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(
        f"^{re.escape(item)}$"))).click()


def snapshot(page) -> list[dict]:
    return page.evaluate(SNAPSHOT_JS, CELLS)


def run_and_wait(page, item: str, first: int, before: list[dict]) -> float:
    """Runs cells with an item of the Run menu and waits until the kernel is idle, nothing is queued any more
    and cell `first` has a new execution count; returns the wall seconds."""
    started = time.monotonic()
    menu(page, "Run", item)
    wait_for(page, SETTLED_JS, [CELLS, first, before[first]["prompt"]], RUN_TIMEOUT, f"Run > {item}")
    seconds = time.monotonic() - started
    # outputs arrive before the kernel goes idle; images still have to be decoded by the page
    wait_for(page, IMAGES_LOADED_JS, None, 30_000, "images decoded")
    return seconds


def open_and_run_all(context, lab: Lab, path: Path) -> Run:
    """What a student does: open the notebook, wait for the kernel, Run > Run All Cells.  JupyterLab stops a
    run at the first cell that raises (the cells queued after it never run), so after each stop the student
    selects the cell that follows the failed one and uses Run > Run Selected Cell and All Below, until every
    code cell has run."""
    specs = cell_specs(json.loads(path.read_text(encoding="utf-8")))
    page = context.new_page()
    started = time.monotonic()
    page.goto(lab.notebook_url(path.name))
    wait_for(page, READY_JS, [CELLS, len(specs)], NOTEBOOK_READY, f"{path.name} open with an idle kernel")
    run = Run(path.stem, page, specs, snapshot(page), time.monotonic() - started)
    assert [c["code"] for c in run.cells] == [s.cell_type == "code" for s in specs], "cells out of order"
    for cell, spec in zip(run.cells, specs):
        if spec.cell_type == "code":
            # JupyterLab creates the editors of cells far below the view lazily: an empty one is not drawn yet
            assert not cell["source"].strip() or cell["source"].strip().startswith(spec.first_line), (spec, cell)
            assert not EXECUTED.match(cell["prompt"]), f"{spec.grade_id} has run before Run All: {cell['prompt']}"
    code = [s.index for s in specs if s.cell_type == "code"]

    run.run_seconds.append(run_and_wait(page, "Run All Cells", code[0], run.cells))
    run.cells = snapshot(page)
    for _ in code:
        waiting = [i for i in code if not EXECUTED.match(run.cells[i]["prompt"])]
        if not waiting:
            break
        stopped = max(i for i in code if i < waiting[0] and EXECUTED.match(run.cells[i]["prompt"]))
        run.stops.append(specs[stopped].grade_id)
        page.locator(CELLS).nth(stopped + 1).locator(".jp-InputPrompt").first.click()
        wait_for(page, "([cells, i]) => document.querySelectorAll(cells)[i].classList.contains('jp-mod-active')",
                 [CELLS, stopped + 1], 10_000, "the cell after the failed one selected")
        run.run_seconds.append(run_and_wait(page, "Run Selected Cell and All Below", waiting[0], run.cells))
        run.cells = snapshot(page)
    return run


def screenshots(run: Run, folder: Path, cells: list[str]) -> list[Path]:
    """The page as the student sees it; the whole notebook (the viewport stretched to the notebook's height,
    so that every cell is drawn); and each cell of `cells`."""
    page, shots = run.page, []
    shots.append(folder / f"{run.name}-jupyterlab.png")
    page.screenshot(path=shots[-1], full_page=True)
    extra = page.evaluate("""() => {
        const panel = document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer');
        return panel ? panel.scrollHeight - panel.clientHeight : 0 }""")
    try:
        page.set_viewport_size({"width": VIEWPORT["width"],
                                "height": min(TALLEST_SCREENSHOT, VIEWPORT["height"] + extra)})
        page.locator(CELLS).first.scroll_into_view_if_needed()
        page.wait_for_timeout(500)  # cells that just came into view are drawn
        shots.append(folder / f"{run.name}-whole-notebook.png")
        page.screenshot(path=shots[-1])
        for grade_id in cells:
            shots.append(folder / f"{run.name}-cell-{grade_id}.png")
            run.locator(grade_id).screenshot(path=shots[-1])
    finally:
        page.set_viewport_size(VIEWPORT)
    for shot in shots:
        assert shot.stat().st_size > 10_000, f"{shot} looks empty"
        print(f"screenshot: {shot}")
    return shots


@pytest.fixture(scope="module")
def solved_run(browser_context, lab, notebooks) -> Run:
    run = open_and_run_all(browser_context, lab, notebooks["solved"])
    print(f"\nsolved notebook: page and kernel ready in {run.load_seconds:.1f} s, "
          f"runs {', '.join(f'{s:.1f} s' for s in run.run_seconds)}")
    return run


@pytest.fixture(scope="module")
def one_bug_run(browser_context, lab, notebooks) -> Run:
    run = open_and_run_all(browser_context, lab, notebooks["one_bug"])
    print(f"\none-bug notebook: page and kernel ready in {run.load_seconds:.1f} s, "
          f"runs {', '.join(f'{s:.1f} s' for s in run.run_seconds)} (stopped after {run.stops})")
    return run


def last_line(cell) -> str:
    """What a check cell printed last: its pass line, after whatever table it prints."""
    lines = texts(cell).strip().splitlines()
    return lines[-1] if lines else ""


def texts(cell: dict) -> str:
    return "\n".join(o["text"] for o in cell["outputs"])


def shows_error(cell: dict) -> bool:
    """An error output, or anything written to stderr: JupyterLab renders both with the stderr MIME type."""
    return any(o["mime"] == "application/vnd.jupyter.stderr" or "Traceback" in o["text"] for o in cell["outputs"])


def assert_plots_rendered(run: Run) -> None:
    for grade_id in PLOTS:
        cell = run.cell(grade_id)
        assert not shows_error(cell), (grade_id, texts(cell))
        assert len(cell["images"]) == 1, f"{run.name}: {grade_id} shows {len(cell['images'])} images: {texts(cell)!r}"
        image = cell["images"][0]
        assert image["complete"] and image["naturalWidth"] > 100 and image["naturalHeight"] > 100, (grade_id, image)


# --- the tests ------------------------------------------------------------------------------------------------

def test_debian_chromium_is_installed():
    assert CHROMIUM.exists(), MISSING_CHROMIUM


def test_the_solved_notebook_passes_every_visible_check_and_draws_both_plots(solved_run, tmp_path):
    run = solved_run
    assert run.stops == [], f"Run All Cells stopped after {run.stops}"
    checks = run.check_cells()
    assert len(checks) == len(load(ASSIGNMENT).built_on) == 11, [c.grade_id for c in checks]
    for spec, cell in zip(run.specs, run.cells):
        if spec.cell_type == "code":
            assert EXECUTED.match(cell["prompt"]), f"{spec.grade_id} has no execution count: {cell['prompt']!r}"
            assert not shows_error(cell), f"{spec.grade_id} shows an error:\n{texts(cell)}"
    for spec in checks:
        assert last_line(run.cell(spec.grade_id)) == spec.pass_line, spec.grade_id  # after any table it prints
    assert_plots_rendered(run)
    counts = [int(c["prompt"][1:-2]) for c in run.cells if c["code"]]
    assert counts == list(range(counts[0], counts[0] + len(counts))), f"cells did not run in order: {counts}"
    screenshots(run, tmp_path, list(PLOTS))


HINTS = "layer_norm_hints"  # a hints cell: staged hints in <details> blocks, which JupyterLab renders folded
DETAILS_OPEN_JS = "blocks => blocks.map(block => block.open)"


def test_a_hint_is_folded_until_its_summary_is_clicked(solved_run, tmp_path):
    run = solved_run
    cell = run.locator(HINTS)
    cell.scroll_into_view_if_needed()
    hints = cell.locator(".jp-RenderedMarkdown details")
    hints.first.wait_for(state="attached", timeout=30_000)
    staged = len(re.findall("<details>", next(source_text(c) for c in json.loads(
        Assignment(ASSIGNMENT).release_notebook.read_text(encoding="utf-8"))["cells"]
        if nbgrader_meta(c).get("grade_id") == HINTS)))
    assert staged >= 2 and hints.count() == staged
    assert hints.evaluate_all(DETAILS_OPEN_JS) == [False] * staged
    first = hints.first
    text = first.locator(":scope > :not(summary)").first  # the hint itself, drawn only when unfolded
    assert first.locator("summary").is_visible() and not text.is_visible()
    first.locator("summary").click()
    run.page.wait_for_function("d => d.open", arg=first.element_handle(), timeout=10_000)
    assert hints.evaluate_all(DETAILS_OPEN_JS) == [True] + [False] * (staged - 1), "one hint at a time"
    assert text.is_visible() and text.inner_text().strip()
    shot = tmp_path / "hint-opened.png"
    cell.screenshot(path=shot)
    print(f"screenshot: {shot}")
    first.locator("summary").click()  # folded again, as the other tests of the page expect nothing open
    run.page.wait_for_function("d => !d.open", arg=first.element_handle(), timeout=10_000)


def test_the_one_bug_notebook_fails_its_part_with_the_message_and_the_other_parts_pass(one_bug_run, tmp_path):
    run = one_bug_run
    catalogue = load(ASSIGNMENT)
    entry = catalogue.entry(MISTAKE)
    assert entry.part == MISTAKE_PART
    may_fail = catalogue.may_cost(MISTAKE_PART)  # its own part and the parts built on it
    release = json.loads(Assignment(ASSIGNMENT).release_notebook.read_text(encoding="utf-8"))
    check_source = next(source_text(c) for c in release["cells"] if nbgrader_meta(c).get("grade_id") == MISTAKE_PART)
    assert MISTAKE_MESSAGE in check_source, "the check cell's message changed: update MISTAKE_MESSAGE"

    # JupyterLab stopped Run All at the broken part's check cell; every stop is a check cell that may fail
    assert run.stops and run.stops[0] == MISTAKE_PART, run.stops
    assert set(run.stops) <= may_fail, run.stops
    for spec, cell in zip(run.specs, run.cells):
        if spec.cell_type == "code":
            assert EXECUTED.match(cell["prompt"]), f"{spec.grade_id} has no execution count: {cell['prompt']!r}"

    failing = run.cell(MISTAKE_PART)
    shown = texts(failing)
    assert shows_error(failing) and "AssertionError" in shown, shown
    assert MISTAKE_MESSAGE in shown, shown
    assert next(s.pass_line for s in run.specs if s.grade_id == MISTAKE_PART) not in shown

    for spec in run.check_cells():
        cell = run.cell(spec.grade_id)
        if spec.grade_id in may_fail and spec.grade_id != MISTAKE_PART:
            # built on the broken part: it passes, or fails its own assertion (never anything else)
            assert last_line(cell) == spec.pass_line or "AssertionError" in texts(cell), texts(cell)
        elif spec.grade_id != MISTAKE_PART:
            assert last_line(cell) == spec.pass_line, f"{spec.grade_id}:\n{texts(cell)}"
    for spec, cell in zip(run.specs, run.cells):
        if spec.cell_type == "code" and not spec.pass_line:  # solutions, imports and plots never fail
            assert not shows_error(cell), f"{spec.grade_id} shows an error:\n{texts(cell)}"
    assert_plots_rendered(run)  # neither plot uses layer norm
    screenshots(run, tmp_path, [MISTAKE_PART])


def nbgrader_validate(notebook: Path, course_root: Path) -> subprocess.CompletedProcess:
    """The real `nbgrader validate`, run from the repository root so that it reads the course's
    nbgrader_config.py; the course root (where that config puts nbgrader.log) is a scratch folder."""
    course_root.mkdir(parents=True, exist_ok=True)
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    env = {**os.environ, "PATH": path, "AUTOGRADER_COURSE_ROOT": str(course_root),
           "AUTOGRADER_DB_URL": f"sqlite:///{course_root / 'gradebook.db'}",
           "NBGRADER_EXCHANGE": str(course_root / "exchange")}
    return subprocess.run([sys.executable, "-m", "nbgrader", "validate", str(notebook)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)


def test_nbgrader_validate_passes_the_solved_notebook_and_fails_the_one_bug_notebook(notebooks, tmp_path):
    started = time.monotonic()
    with ThreadPoolExecutor(2) as pool:
        solved, one_bug = pool.map(lambda name: nbgrader_validate(notebooks[name], tmp_path / name),
                                   ["solved", "one_bug"])
    print(f"\nnbgrader validate, both notebooks side by side: {time.monotonic() - started:.1f} s")
    # nbgrader validate exits 0 whether or not the notebook passes: its verdict is in what it prints
    assert solved.returncode == 0, solved.stderr[-3000:]
    assert "Success! Your notebook passes all the tests." in solved.stdout, \
        solved.stdout[-3000:] + solved.stderr[-3000:]
    assert one_bug.returncode == 0, one_bug.stderr[-3000:]
    assert "Success!" not in one_bug.stdout
    failed = re.search(r"VALIDATION FAILED ON (\d+) CELL\(S\)", one_bug.stdout)
    assert failed, one_bug.stdout[-3000:] + one_bug.stderr[-3000:]
    assert 1 <= int(failed.group(1)) <= len(load(ASSIGNMENT).may_cost(MISTAKE_PART)), one_bug.stdout[-3000:]
    assert MISTAKE_MESSAGE[:60] in one_bug.stdout, one_bug.stdout[-3000:]  # nbgrader truncates long lines


def tiny_png(width: int, height: int) -> bytes:
    """A grey RGB PNG of the given size."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    rows = b"".join(b"\0" + b"\x80" * 3 * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def test_image_widths_tells_loaded_images_from_broken_ones(browser_context, tmp_path):
    """The helper an HTML report's test will use: a page with one image that loads and two that do not."""
    png = base64.b64encode(tiny_png(3, 2)).decode()
    page = tmp_path / "report.html"
    page.write_text(f'<html><body><img src="data:image/png;base64,{png}"><img src="missing.png">'
                    f'<img src="data:image/png;base64,AAAA"></body></html>', encoding="utf-8")
    assert image_widths(browser_context, page) == [3, 0, 0]


def test_the_feedback_page_of_the_one_bug_notebook_shows_every_picture(browser_context, notebooks, tmp_path):
    """`grade --html`: the student's feedback page opens in Chromium, every picture in it loads, and the page
    asks for nothing but itself (self-contained: no file or server next to it, no Internet)."""
    page, results = tmp_path / "feedback.html", tmp_path / "results.json"
    started = time.monotonic()
    done = run_cli("grade", notebooks["one_bug"], "--assignment", ASSIGNMENT, "-o", results, "--html", page)
    print(f"\ngrade --html of the one-bug notebook: {time.monotonic() - started:.1f} s")
    assert done.returncode == 0, done.stderr[-3000:]
    parts = json.loads(results.read_text())["extra_data"]["parts"]
    lost = {name for name, p in parts.items() if p["score"] < p["max_score"]}
    assert MISTAKE_PART in lost, lost  # the page is about a submission that lost points
    requested: list[str] = []
    shot = tmp_path / "feedback-page.png"
    widths = image_widths(browser_context, page, screenshot=shot, requested=requested)
    print(f"screenshot: {shot}")
    assert widths, "the feedback page of a submission with a failing check shows no picture"
    assert all(width > 0 for width in widths), f"pictures that did not load: {widths}"
    assert [url for url in requested if not url.startswith(("data:", page.resolve().as_uri()))] == []
