"""Build script for the optional C extensions; everything else is in pyproject.toml.

``jitsim.graph._fasttext`` reads and writes TF's text GraphDefs, ``jitsim.analyses._fastcycles``
inserts the cycle graph's edges, both at C speed (issue 14); ``jitsim._memguard`` turns an
allocation that fails inside protobuf's C code into jitsim's out-of-memory error instead of a
crash (issue 39). They are optional: where no C
compiler is found the build goes on without them and jitsim uses the pure-Python code they
were written from (the same results, slower on big graphs; see ``jitsim.accel``).
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("jitsim.graph._fasttext", ["src/jitsim/graph/_fasttext.c"], optional=True,
              extra_compile_args=["-O2"]),
    Extension("jitsim.analyses._fastcycles", ["src/jitsim/analyses/_fastcycles.c"], optional=True,
              extra_compile_args=["-O2"]),
    Extension("jitsim._memguard", ["src/jitsim/_memguard.c"], optional=True, extra_compile_args=["-O2"]),
])
