/* signals.h: the one signal policy of every front end. The first SIGINT,
 * SIGTERM or SIGHUP stops the work: what runs is stopped, every container
 * is removed (podman rm, at once), and sage-sandbox exits 128+N. A second
 * one, while that goes on, changes nothing but a line on stderr: the
 * removals finish first (a second or so), so that Ctrl-C pressed twice
 * leaves no container. A third exits at once with 128+N of it, leaving
 * what is still being removed to podman's --timeout backstop and
 * `sage-sandbox cleanup`. */
#ifndef SAGE_SANDBOX_SIGNALS_H
#define SAGE_SANDBOX_SIGNALS_H

#include "error.h"
#include "loop.h"

#include <stdbool.h>

struct stop_signals;

/* Watches the three on the loop (a signalfd); on_first gets the first.
 * keep_ignored: a signal the caller ignores (nohup, a background job)
 * stays ignored. NULL with err set on failure. */
struct stop_signals *stop_signals_watch(struct loop *loop, bool keep_ignored,
		void (*on_first)(int sig, void *data), void *data, struct error *err);
/* The first signal, or 0. */
int stop_signals_first(const struct stop_signals *s);
void stop_signals_free(struct stop_signals *s);

#endif
