"""What decides a grade: the suites' API and toolkit, the judge that runs the hidden suites, the rubric."""
