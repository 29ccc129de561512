"""pytest_test: a py_test that runs one tests/<name>.py file with pytest."""

def pytest_test(name, deps = [], data = [], size = "medium", **kwargs):
    """A py_test of `name + ".py"` run by pytest (tools/bazel/pytest_main.py).

    conftest.py and the tests package are added to `deps`: pytest loads them implicitly.

    Args:
      name: the test file's name without ".py".
      deps: the first-party targets the file imports.
      data: files and binaries it reads or runs (test data, `python -m` subprocesses).
      size: Bazel's test size (its timeout: small 60 s, medium 300 s, large 900 s).
      **kwargs: more py_test attributes (tags, timeout, ...).
    """
    native.py_test(
        name = name,
        srcs = [name + ".py", "//tools/bazel:pytest_main.py"],
        main = "//tools/bazel:pytest_main.py",
        args = ["$(location %s.py)" % name],
        deps = deps + [":conftest", ":tests"],
        data = data,
        size = size,
        python_version = "PY3",
        **kwargs
    )
