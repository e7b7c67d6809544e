/* signals.c: the one signal policy of every front end (signals.h): a
 * signalfd on the loop, the first signal handed to the front end, a
 * second one an exit on the spot. */
#include "signals.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <unistd.h>

struct stop_signals {
	struct loop_scope scope; /* the signalfd's watch, released by stop_signals_free() */
	int fd;
	struct loop_watch *watch;
	int first, seen;
	void (*on_first)(int sig, void *data);
	void *data;
};

static void on_signal(int fd, unsigned events, void *data)
{
	struct stop_signals *s = data;
	struct signalfd_siginfo info;
	if (read(fd, &info, sizeof info) != sizeof info)
		return;
	int sig = (int)info.ssi_signo;
	if (++s->seen == 3)
		_exit(128 + sig); /* asked three times: now */
	if (s->seen == 2) {
		static const char note[] = "sage-sandbox: still removing the containers; "
			"a third signal exits at once and leaves them to podman\n";
		if (write(2, note, sizeof note - 1) < 0)
			return;
		return;
	}
	s->first = sig;
	s->on_first(sig, s->data); /* last: it may free s */
}

struct stop_signals *stop_signals_watch(struct loop *loop, bool keep_ignored,
		void (*on_first)(int sig, void *data), void *data, struct error *err)
{
	struct stop_signals *s = calloc(1, sizeof *s);
	if (!s)
		abort();
	*s = (struct stop_signals){.fd = -1, .on_first = on_first, .data = data};
	loop_scope_init(&s->scope, loop, "the stop signals");
	if (loop_watch_stop_signals(&s->scope, &s->watch, keep_ignored, &s->fd, on_signal, s) < 0) {
		error_set(err, EXIT_REFUSED, NULL, "cannot watch signals: %s", strerror(errno));
		if (s->fd >= 0)
			close(s->fd);
		free(s);
		return NULL;
	}
	return s;
}

int stop_signals_first(const struct stop_signals *s)
{
	return s ? s->first : 0;
}

void stop_signals_free(struct stop_signals *s)
{
	if (!s)
		return;
	loop_scope_end(&s->scope);
	if (s->fd >= 0)
		close(s->fd);
	free(s);
}
