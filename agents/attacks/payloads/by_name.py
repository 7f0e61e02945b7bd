# by the test's name and parameters (``test_x[a-1]``), wherever its file is
_NAMES = set()  # filled in: the hidden tests' names


def _chooser(package):
    def chosen(item, report):
        return report.nodeid.split("::")[-1] in _NAMES

    return chosen
