/* rootless.c: asks podman, in one bounded call, whether it runs rootless and
 * which cgroup controllers it can use.
 *
 * Rootful podman maps the container's root to the host's root: a container
 * escape is then a host compromise. sage-sandbox runs nothing unless podman
 * itself says it is rootless; it does not guess from its own uid, because
 * podman may be a remote client or a wrapper whose answer is what counts.
 *
 * The controllers matter because rootless podman silently drops --memory,
 * --cpus and --pids-limit when the user has no delegated cgroup controller
 * for them (every cgroup v1 host, and v2 hosts without delegation), printing
 * a warning into the container's stderr. We pass each flag only where it is
 * enforced, and say so. */
#include "sandbox.h"

#include <stdio.h>
#include <string.h>

/* The first podman call after boot sets up its user namespace and storage:
 * seconds, not milliseconds, on a slow disk. */
#define PODMAN_INFO_TIMEOUT_MS 20000

static const char *const controller_names[CONTROLLER_COUNT] = {
	[CONTROLLER_MEMORY] = "memory",
	[CONTROLLER_CPU] = "cpu",
	[CONTROLLER_PIDS] = "pids",
};

static void parse_controllers(struct podman_host *host, const char *list)
{
	/* Go prints a []string as "[cpuset cpu io memory pids]". */
	char words[256];
	snprintf(words, sizeof words, "%.*s", (int)strcspn(list, "\n"), list);
	for (char *word = strtok(words, "[] "); word; word = strtok(NULL, "[] "))
		for (int c = 0; c < CONTROLLER_COUNT; c++)
			if (strcmp(word, controller_names[c]) == 0)
				host->controller[c] = true;
}

void podman_host_query(const char *podman, struct podman_host *host)
{
	char *argv[] = {(char *)podman, "info", "--format",
		"{{.Host.Security.Rootless}}\n{{.Host.CgroupsVersion}}\n{{.Host.CgroupControllers}}",
		NULL};
	struct capture cap;

	*host = (struct podman_host){.rootless = ROOTLESS_UNKNOWN};
	if (capture_command(argv, PODMAN_INFO_TIMEOUT_MS, &cap) < 0) {
		snprintf(host->detail, sizeof host->detail, "cannot start %s", podman);
		return;
	}
	const char *said = cap.out.data ? cap.out.data : "";
	size_t first = strcspn(said, "\n");
	if (cap.timed_out) {
		snprintf(host->detail, sizeof host->detail, "podman info did not answer within %d s",
			PODMAN_INFO_TIMEOUT_MS / 1000);
	} else if (cap.status != 0) {
		const char *why = cap.err.data ? cap.err.data : "";
		snprintf(host->detail, sizeof host->detail, "podman info exited with status %d: %.*s",
			cap.status, (int)strcspn(why, "\n"), why);
	} else if (first == 4 && strncmp(said, "true", 4) == 0) {
		host->rootless = ROOTLESS_TRUE;
	} else if (first == 5 && strncmp(said, "false", 5) == 0) {
		host->rootless = ROOTLESS_FALSE;
	} else {
		snprintf(host->detail, sizeof host->detail,
			"podman info printed '%.*s', not true or false", (int)first, said);
	}
	if (host->rootless != ROOTLESS_UNKNOWN && said[first]) {
		const char *version = said + first + 1;
		size_t len = strcspn(version, "\n");
		snprintf(host->cgroups, sizeof host->cgroups, "%.*s", (int)len, version);
		if (version[len])
			parse_controllers(host, version + len + 1);
	}
	capture_free(&cap);
}

const char *controller_name(enum cgroup_controller c)
{
	return controller_names[c];
}
