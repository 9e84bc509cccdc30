"""Import stub for `mindspore` (reference runs only: the kernel compare does not use MindSpore itself)."""

import concurrent.futures, importlib.abc, importlib.machinery, sys, types


class _Meta(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _make(name)

    def __iter__(cls):
        return iter(())


class Stub(metaclass=_Meta):
    def __init__(self, *a, **k):
        pass

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _make(name)

    def __call__(self, *a, **k):
        return a[0] if len(a) == 1 and callable(a[0]) and not k else Stub()


def _make(name):
    return _Meta(name, (Stub,), {})


class _Mod(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _make(name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname == "mindspore" or fullname.startswith("mindspore."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = _Mod(spec.name)
        m.__path__ = []
        m.__version__ = "2.7.0"
        return m

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
