# How every Makefile of the repository finds Python 3.13: the top Makefile includes this file, and
# so does layers/core/Makefile, which `sam build` runs on its own (in a copy of layers/core, hence
# this file's place). `PYTHON=/path/to/python3.13 make ...` overrides it.
#
# On a pyenv machine, `python3.13` is pyenv's shim, which runs only when a 3.13 version is selected
# (else "python3.13: command not found"): unless PYENV_VERSION is set already, the newest installed
# 3.13.x is named. Without pyenv nothing is set and python3.13 is found on PATH.
ifeq ($(origin PYENV_VERSION),undefined)
PYENV_313 := $(shell pyenv versions --bare --skip-aliases 2>/dev/null | grep -E '^3\.13\.[0-9]+$$' | sort -t. -k3 -n | tail -n 1)
ifneq ($(PYENV_313),)
export PYENV_VERSION := $(PYENV_313)
endif
endif
PYTHON ?= python3.13
