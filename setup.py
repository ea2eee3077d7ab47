"""Build the native decoder (native/*.c) as ``kafka_tiered_source._native``.

The extension is compiled by a normal ``pip install`` with the machine's C compiler;
nothing prebuilt is downloaded.  ``KAFKA_TIERED_SANITIZE=1`` builds it with
AddressSanitizer and UndefinedBehaviorSanitizer for the fuzz script (run the
interpreter with ``LD_PRELOAD=$(gcc -print-file-name=libasan.so)``).
``KAFKA_TIERED_SANITIZE=atheris`` instruments with ASan only and leaves the runtime to atheris'
``asan_with_fuzzer.so`` (see benchmarks/fuzz_decode.py).  ``KAFKA_TIERED_DEBUG=1`` builds without optimisation and with assertions.
"""
import glob
import os

from setuptools import Extension, setup

sources = sorted(glob.glob("native/*.c"))
compile_args = ["-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fno-strict-aliasing"]
link_args = []
macros = []
if os.environ.get("KAFKA_TIERED_SANITIZE") == "1":
    compile_args += ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined",
                     "-fno-sanitize-recover=undefined"]
    link_args += ["-fsanitize=address,undefined"]
elif os.environ.get("KAFKA_TIERED_SANITIZE") == "atheris":
    # ASan instrumentation only, runtime not linked: the fuzz script preloads atheris'
    # asan_with_fuzzer.so (clang's runtime + libFuzzer), which gives coverage-guided fuzzing;
    # linking gcc's libasan as well would make two incompatible ASan runtimes.
    compile_args += ["-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address"]
elif os.environ.get("KAFKA_TIERED_DEBUG") == "1":
    compile_args += ["-O0", "-g"]
else:
    compile_args += ["-O3"]
    macros.append(("NDEBUG", "1"))

ext_modules = []
if sources:
    ext_modules.append(Extension(
        "kafka_tiered_source._native",
        sources=sources,
        include_dirs=["native"],
        define_macros=macros,
        extra_compile_args=compile_args,
        extra_link_args=link_args,
        depends=sorted(glob.glob("native/*.h")),
    ))

setup(ext_modules=ext_modules)
