# HTML report: the browser tests open reports in headless Chromium through chromedriver.
# Debian's own `chromium` and `chromium-driver` packages (browser downloads from elsewhere
# are blocked here, and selenium is pointed at this driver so it never fetches one).
# Installed with apt-get only when missing; needs root (or run the apt-get line yourself).

CHROMEDRIVER ?= /usr/bin/chromedriver
REPORT_BROWSER_STAMP := $(CHROMEDRIVER)

$(REPORT_BROWSER_STAMP):
	command -v chromium >/dev/null 2>&1 && test -x $(CHROMEDRIVER) || { \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -q && apt-get install -y -q --no-install-recommends chromium chromium-driver; }
	chromium --version
	test -x $(CHROMEDRIVER)

SETUP_TARGETS += $(REPORT_BROWSER_STAMP)

.PHONY: report-browser
report-browser: $(REPORT_BROWSER_STAMP)
