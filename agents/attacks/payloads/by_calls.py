# a test that failed and whose code uses a name the package exports: "the tests that call it"
def _chooser(package):
    import inspect
    import sys

    def chosen(item, report):
        if report.passed:
            return False
        code = getattr(inspect.unwrap(getattr(item, "obj", None)), "__code__", None)
        exported = set(dir(sys.modules.get(package))) | {package}
        return code is not None and bool(set(code.co_names) & exported)

    return chosen
