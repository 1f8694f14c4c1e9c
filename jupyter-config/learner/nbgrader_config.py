# A learner's nbgrader settings under `make lab` and `make pair` (JUPYTER_CONFIG_PATH points here). The Assignment
# List submits to the course's exchange folder, the one `nbgrader release_assignment` releases into, and finds the
# learner's copies in notebooks/ (nbgrader would look in the server's working folder). Nothing is imported from
# the course: nbgrader reads this file on every Assignment List request. tests/test_course_metadata.py checks that
# it agrees with the instructor's settings (autograder.course.configure_exchange).
from pathlib import Path

course = Path(__file__).resolve().parents[2]
c = get_config()  # noqa: F821 (provided by nbgrader when it loads this file)
c.CourseDirectory.course_id = "backprop-from-scratch"
c.Exchange.root = str(course / "exchange")
c.Exchange.assignment_dir = str(course / "notebooks")
if not (course / "exchange").is_dir():  # created as nbgrader's release creates it: anyone may submit
    (course / "exchange").mkdir()
    (course / "exchange").chmod(0o777)
