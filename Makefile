# sage-sandbox: run SageMath code in a rootless Podman sandbox.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
CC ?= cc
CFLAGS ?= -O2 -g
CFLAGS += -std=c11 -Wall -Wextra -Wshadow -Wno-unused-parameter
CPPFLAGS += -D_GNU_SOURCE
# jansson parses what MCP clients send: untrusted JSON is not parsed by hand.
# nettle hashes the files a run brings back (sha256).
LDLIBS += -ljansson -lnettle
SCDOC ?= scdoc
BATS ?= bats

# One concern a file; see the layout table in README.md.
CORE_OBJECTS = frames.o loop.o process.o buffer.o error.o settings.o podman.o cache.o rootless.o image.o sandbox.o \
	oneshot.o result.o terminal.o memwatch.o json.o selftest.o pool.o mcp.o embedded.o \
	infiles.o outfiles.o names.o sniff.o base64.o jobs.o batch.o
OBJECTS = sage-sandbox.o $(CORE_OBJECTS)
HEADERS = frames.h loop.h process.h buffer.h error.h settings.h podman.h cache.h rootless.h image.h sandbox.h \
	oneshot.h result.h terminal.h memwatch.h json.h selftest.h pool.h mcp.h embedded.h \
	infiles.h outfiles.h names.h sniff.h base64.h jobs.h batch.h
EMBEDDED = seccomp.json launcher-bundle.py checks.py mcp-tools.json
LAUNCHER = $(wildcard launcher/*.py)
DATADIR ?= $(PREFIX)/share
MANPAGES = man/sage-sandbox.1 man/sage-sandbox.5 man/sage-sandbox-mcp.7

all: sage-sandbox $(MANPAGES)

sage-sandbox: $(OBJECTS)
	$(CC) $(LDFLAGS) -o $@ $(OBJECTS) $(LDLIBS)

$(OBJECTS): $(HEADERS)

# The seccomp profile and the programs run inside the container are
# compiled in: what runs is what was tested, and no file can go missing.
# Written to a temporary file and renamed: a failing step never leaves a
# partial embedded.c that make would take for up to date.
# The launcher's modules, joined into the one program podman is given.
launcher-bundle.py: $(LAUNCHER)
	python3 launcher/bundle.py $(LAUNCHER) > $@.tmp && mv -f $@.tmp $@

embedded.c: $(EMBEDDED)
	for f in $(EMBEDDED); do \
		printf 'const char embedded_%s[] =\n' "$$(printf %s "$$f" | tr .- __)"; \
		sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/^/\t"/' -e 's/$$/\\n"/' "$$f" || exit 1; \
		printf '\t"";\n'; \
	done > $@.tmp && mv -f $@.tmp $@

tests/unit: tests/unit.c $(CORE_OBJECTS) $(HEADERS)
	$(CC) $(CPPFLAGS) $(CFLAGS) -I. $(LDFLAGS) -o $@ tests/unit.c $(CORE_OBJECTS) $(LDLIBS)

# The loop and the process module on plain /bin/sh children: no podman.
tests/unit-loop: tests/unit-loop.c $(CORE_OBJECTS) $(HEADERS)
	$(CC) $(CPPFLAGS) $(CFLAGS) -I. $(LDFLAGS) -o $@ tests/unit-loop.c $(CORE_OBJECTS) $(LDLIBS)

.SUFFIXES: .scd
man/sage-sandbox.1: man/sage-sandbox.1.scd
	$(SCDOC) < man/sage-sandbox.1.scd > $@
man/sage-sandbox.5: man/sage-sandbox.5.scd
	$(SCDOC) < man/sage-sandbox.5.scd > $@
man/sage-sandbox-mcp.7: man/sage-sandbox-mcp.7.scd
	$(SCDOC) < man/sage-sandbox-mcp.7.scd > $@

# The whole suite runs the real sage-sandbox against the real image under
# rootless podman; run it as the unprivileged account (./setup.sh check).
check: sage-sandbox tests/unit tests/unit-loop lmstudio/node_modules
	./tests/unit
	./tests/unit-loop
	python3 tests/unit-checks.py
	$(BATS) tests/
	node --test tests/mcp-sdk.test.mjs
	cd lmstudio && npm test

# The LM Studio plugin's dependencies, exactly as locked.
lmstudio/node_modules: lmstudio/package.json lmstudio/package-lock.json
	cd lmstudio && npm ci --no-audit --no-fund
	touch $@

install: all
	mkdir -p $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(MANDIR)/man7 \
		$(DESTDIR)$(DATADIR)/sage-sandbox
	cp -f sage-sandbox $(DESTDIR)$(BINDIR)/sage-sandbox
	chmod 755 $(DESTDIR)$(BINDIR)/sage-sandbox
	cp -f man/sage-sandbox.1 $(DESTDIR)$(MANDIR)/man1/sage-sandbox.1
	cp -f man/sage-sandbox.5 $(DESTDIR)$(MANDIR)/man5/sage-sandbox.5
	cp -f man/sage-sandbox-mcp.7 $(DESTDIR)$(MANDIR)/man7/sage-sandbox-mcp.7
	cp -f seccomp.json $(DESTDIR)$(DATADIR)/sage-sandbox/seccomp.json

# Everything install put in place, its own directory included; the shared
# ones (bin, man1) stay.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/sage-sandbox $(DESTDIR)$(MANDIR)/man1/sage-sandbox.1 \
		$(DESTDIR)$(MANDIR)/man5/sage-sandbox.5 $(DESTDIR)$(MANDIR)/man7/sage-sandbox-mcp.7 \
		$(DESTDIR)$(DATADIR)/sage-sandbox/seccomp.json
	if [ -d $(DESTDIR)$(DATADIR)/sage-sandbox ]; then rmdir $(DESTDIR)$(DATADIR)/sage-sandbox; fi

clean:
	rm -f sage-sandbox $(OBJECTS) embedded.c embedded.c.tmp launcher-bundle.py launcher-bundle.py.tmp tests/unit tests/unit-loop $(MANPAGES)
	rm -rf lmstudio/dist

.PHONY: all check install uninstall clean
