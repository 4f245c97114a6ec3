"""nbgrader configuration for the course.  The repository root is the course directory."""
import os

from nbgrader.preprocessors import ClearHiddenTests, GetGrades
from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor

from autograder.nbgrader.course import enable

c = get_config()  # noqa: F821 (nbgrader supplies get_config)

c.CourseDirectory.course_id = os.environ.get("AUTOGRADER_COURSE_ID", "transformer-blocks")
c.CourseDirectory.root = os.environ.get("AUTOGRADER_COURSE_ROOT", os.path.dirname(os.path.abspath(__file__)))
c.CourseDirectory.db_url = os.environ.get(
    "AUTOGRADER_DB_URL", "sqlite:///" + os.path.join(c.CourseDirectory.root, "gradebook.db"))
c.Exchange.root = os.environ.get("NBGRADER_EXCHANGE", "/srv/nbgrader/exchange")
c.NbGrader.logfile = os.path.join(c.CourseDirectory.root, "nbgrader.log")

# The kit's steps in nbgrader's lists (autograder/nbgrader/course.py, the two lines any course adds): ReleaseCells
# first among the sanitising steps (which cells are the release's, docs/instructors.md "Which cells are graded"),
# SandboxedGrading in place of nbgrader's Execute (hidden tests never run in the student's kernel; an assignment
# with no rubric of the kit's is graded by its own test cells, in the sandbox), the kit's reader of submissions,
# and generate_feedback's pictures.  Its limits are traits of SandboxedGrading and AUTOGRADER_* variables
# (autograder/model/limits.py), e.g.
#   c.SandboxedGrading.timeout = 180              or AUTOGRADER_TIMEOUT=180
#   c.SandboxedGrading.memory_mb = 2048           or AUTOGRADER_MEMORY_MB=2048
#   c.SandboxedGrading.allow_unisolated = True    or AUTOGRADER_ALLOW_UNISOLATED=1
# and grade-all's results are reused instead of grading again with
#   c.SandboxedGrading.reuse_results_from = ["results/transformer_block"]   or AUTOGRADER_REUSE_RESULTS
enable(c)
# A deleted test cell is added back by SandboxedGrading after grading, carrying its part's verdict (the hidden
# suite graded the part anyway: nothing lost, nothing gained).  nbgrader's own add_missing_cells stays off: it
# fails on a notebook whose cells lost their grade_id, re-adds cells the kit does not grade, and would change
# the cells that reuse_results_from compares.
c.OverwriteCells.add_missing_cells = False
c.LimitOutput.max_lines = 400

# LMS downloads (Canvas style: <student>_<late_>?<id>_<id>_<file>) for `nbgrader zip_collect`
c.ZipCollectApp.collector_plugin = "nbgrader.plugins.zipcollect.FileNameCollectorPlugin"
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9.-]+)_(?:late_)?\d+_\d+_(?P<file_id>[\w.-]+\.ipynb)$")

# nbgrader's feedback, less the hidden tests of any ordinary assignment of the course
c.GenerateFeedback.preprocessors = [GetGrades, CSSHTMLHeaderPreprocessor, ClearHiddenTests]
