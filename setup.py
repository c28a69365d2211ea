"""Build script for the one optional C extension; everything else is in pyproject.toml.

``jitsim.graph._fasttext`` reads and writes TF's text GraphDefs at C speed (issue 14). It is
optional: where no C compiler is found the build goes on without it and jitsim uses the
pure-Python code it was written from (the same output, about ten times slower on big dumps).
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("jitsim.graph._fasttext", ["src/jitsim/graph/_fasttext.c"], optional=True,
              extra_compile_args=["-O2"]),
])
