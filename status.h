/* status.h: `sage-sandbox status` as a front end: the host check's value
 * (host.c) and what only status asks (podman's version, the image's
 * digest, whether Sage starts in a real sandbox, a remote service tried),
 * printed as text or as the JSON object of sage-sandbox(5). */
#ifndef SAGE_SANDBOX_STATUS_H
#define SAGE_SANDBOX_STATUS_H

#include "host.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

struct status_report {
	const struct config *cfg;
	struct host host;
	char podman_version[128];
	bool image_asked;          /* not as root: root's images are not the user's */
	bool image_present;
	char image_digest[128];
	char image_failure[320];   /* podman failed asking for it, not "no such
				    * image": what it said */
	bool sage_asked;           /* a real sandbox ran an empty program */
	bool sage_starts;
	struct error sage_refusal; /* when it does not */
	char remote_answer[300];   /* what the remote service said when tried */
	/* What the server said (client.c), with whether it serves this
	 * build's and this environment's runs; NULL from status_from_host. */
	json_t *server;
};

/* Asks everything, blocking (status in a terminal). */
void status_gather(const struct config *cfg, struct status_report *s);
/* From a host already checked, asking nothing more (the MCP tool). */
void status_from_host(const struct config *cfg, const struct host *h, struct status_report *s);
void status_free(struct status_report *s);
/* Ready: a sandbox can run (and, where it was asked, Sage starts in it). */
bool status_ready(const struct status_report *s);
void status_print_text(FILE *out, const struct status_report *s);
void status_print_json(FILE *out, const struct status_report *s);

#endif
