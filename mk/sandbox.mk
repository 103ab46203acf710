# AppWorld's sandbox: agent code runs inside bubblewrap (own PID, network and mount
# namespaces; docs/security.md, "The sandbox"). Debian's `bubblewrap` package, installed with
# apt-get only when missing; needs root (or run the apt-get line yourself).

BWRAP ?= /usr/bin/bwrap

$(BWRAP):
	command -v bwrap >/dev/null 2>&1 || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -q && apt-get install -y -q --no-install-recommends bubblewrap; }
	bwrap --version

SETUP_TARGETS += $(BWRAP)

.PHONY: appworld-sandbox
appworld-sandbox: $(BWRAP)
