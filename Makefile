# sage-sandbox: run SageMath code in a rootless Podman sandbox.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
CC ?= cc
CFLAGS ?= -O2 -g
CFLAGS += -std=c11 -Wall -Wextra -Wshadow -Wno-unused-parameter
CPPFLAGS += -D_GNU_SOURCE
SCDOC ?= scdoc
BATS ?= bats

OBJECTS = sage-sandbox.o sandbox.o rootless.o json.o
MANPAGES = man/sage-sandbox.1 man/sage-sandbox.5

all: sage-sandbox $(MANPAGES)

sage-sandbox: $(OBJECTS)
	$(CC) $(LDFLAGS) -o $@ $(OBJECTS) $(LDLIBS)

$(OBJECTS): sandbox.h json.h

tests/unit: tests/unit.c json.o sandbox.o rootless.o sandbox.h json.h
	$(CC) $(CPPFLAGS) $(CFLAGS) -I. $(LDFLAGS) -o $@ tests/unit.c json.o sandbox.o rootless.o

.SUFFIXES: .scd
man/sage-sandbox.1: man/sage-sandbox.1.scd
	$(SCDOC) < man/sage-sandbox.1.scd > $@
man/sage-sandbox.5: man/sage-sandbox.5.scd
	$(SCDOC) < man/sage-sandbox.5.scd > $@

# The whole suite runs the real sage-sandbox against the real image under
# rootless podman; run it as the unprivileged account (./setup.sh check).
check: sage-sandbox tests/unit
	./tests/unit
	$(BATS) tests/

install: all
	mkdir -p $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5
	cp -f sage-sandbox $(DESTDIR)$(BINDIR)/sage-sandbox
	chmod 755 $(DESTDIR)$(BINDIR)/sage-sandbox
	cp -f man/sage-sandbox.1 $(DESTDIR)$(MANDIR)/man1/sage-sandbox.1
	cp -f man/sage-sandbox.5 $(DESTDIR)$(MANDIR)/man5/sage-sandbox.5

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/sage-sandbox $(DESTDIR)$(MANDIR)/man1/sage-sandbox.1 \
		$(DESTDIR)$(MANDIR)/man5/sage-sandbox.5

clean:
	rm -f sage-sandbox $(OBJECTS) tests/unit $(MANPAGES)

.PHONY: all check install uninstall clean
