"""nbgrader configuration for the course.  The repository root is the course directory."""
import os

from nbgrader.preprocessors import (AssignLatePenalties, ClearHiddenTests, ClearOutput,
                                    DeduplicateIds, GetGrades, IgnorePattern, LimitOutput, OverwriteCells,
                                    OverwriteKernelspec, SaveAutoGrades)
from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor

from autograder.model.limits import BadLimit, from_environment as limits_from_environment

c = get_config()  # noqa: F821 (nbgrader supplies get_config)

c.CourseDirectory.course_id = os.environ.get("AUTOGRADER_COURSE_ID", "transformer-blocks")
c.CourseDirectory.root = os.environ.get("AUTOGRADER_COURSE_ROOT", os.path.dirname(os.path.abspath(__file__)))
c.CourseDirectory.db_url = os.environ.get(
    "AUTOGRADER_DB_URL", "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db"))
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
c.NbGrader.logfile = os.path.join(c.CourseDirectory.root, "nbgrader.log")

# Which cells are graded (docs/instructors.md, "Which cells are graded"): the kit reads the submission as `grade`
# does (a byte-order mark is fine; a file it refuses gets a 0 with the reason in every test cell instead of a
# failed autograde), and ReleaseCells decides, before nbgrader's own steps, which cells are the release's
# (the last cell carrying a grade_id the gradebook knows, with the same role): the others lose their
# nbgrader metadata, so that a cell pasted twice or a test cell the student added no longer fails the
# notebook.  nbgrader then restores the release's locked cells from the gradebook, as always.
c.Autograde.exporter_class = "autograder.nbgrader.plugin.SubmissionExporter"
c.Autograde.sanitize_preprocessors = [
    "autograder.nbgrader.plugin.ReleaseCells", ClearOutput, DeduplicateIds, OverwriteKernelspec, OverwriteCells,
    "autograder.nbgrader.cell_metadata.CheckCellMetadata",
]
# A deleted test cell is added back by SandboxedGrading after grading, carrying its part's verdict (the hidden
# suite graded the part anyway: nothing lost, nothing gained).  nbgrader's own add_missing_cells stays off: it
# fails on a notebook whose cells lost their grade_id, re-adds cells the kit does not grade, and would change
# the cells that reuse_results_from compares.
c.OverwriteCells.add_missing_cells = False

# Hidden tests never run in the student's kernel: nbgrader's Execute is replaced by the kit's sandboxed
# grader, which writes each test cell's verdict before SaveAutoGrades reads it.  Named, not imported: only
# autograde loads the grader (torch and all, seconds); every other nbgrader command reads this file too.
c.Autograde.autograde_preprocessors = [
    "autograder.nbgrader.plugin.SandboxedGrading", IgnorePattern, ClearMetadataPreprocessor, LimitOutput,
    SaveAutoGrades, AssignLatePenalties, "autograder.nbgrader.cell_metadata.CheckCellMetadata",
]
# nbgrader's CheckCellMetadata checks its JSON schema anew for every cell; the kit's compiles it once, and
# hands any notebook it does not accept at once to nbgrader's own step (autograder/nbgrader/cell_metadata.py).
# Sandbox limits: each is a trait of SandboxedGrading and an AUTOGRADER_* environment variable, generated
# from autograder/model/limits.py (defaults and meaning there, and in the Limits table of docs/instructors.md), e.g.
#   c.SandboxedGrading.timeout = 180              or AUTOGRADER_TIMEOUT=180
#   c.SandboxedGrading.memory_mb = 2048           or AUTOGRADER_MEMORY_MB=2048
#   c.SandboxedGrading.allow_unisolated = True    or AUTOGRADER_ALLOW_UNISOLATED=1
try:
    for trait, value in limits_from_environment(os.environ).items():
        setattr(c.SandboxedGrading, trait, value)
except BadLimit as exc:
    raise SystemExit(f"nbgrader_config.py: {exc}") from None
# Reuse the results of `python -m autograder grade-all` instead of grading again, when one judged the same
# cells against the same suites, rubric, kit and limits (see docs/instructors.md), e.g.
#   c.SandboxedGrading.reuse_results_from = ["results/transformer_block"]
# or AUTOGRADER_REUSE_RESULTS, folders separated by os.pathsep (":").
if os.environ.get("AUTOGRADER_REUSE_RESULTS"):
    c.SandboxedGrading.reuse_results_from = [
        folder for folder in os.environ["AUTOGRADER_REUSE_RESULTS"].split(os.pathsep) if folder]
c.LimitOutput.max_lines = 400

# LMS downloads (Canvas style: <student>_<late_>?<id>_<id>_<file>) for `nbgrader zip_collect`
c.ZipCollectApp.collector_plugin = "nbgrader.plugins.zipcollect.FileNameCollectorPlugin"
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9.-]+)_(?:late_)?\d+_\d+_(?P<file_id>[\w.-]+\.ipynb)$")

c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor, ClearHiddenTests]
# autograde writes the evidence of each failing check into its part's check cell; the HTML exporter draws it
# (generate_feedback's pages): drawing is the slow part, and grading does not need it.
c.HTMLExporter.preprocessors = ["autograder.nbgrader.pictures.DrawPictures"]
