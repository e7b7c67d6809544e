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
	snprintf(words, sizeof words, "%s", list);
	for (char *word = strtok(words, "[] "); word; word = strtok(NULL, "[] "))
		for (int c = 0; c < CONTROLLER_COUNT; c++)
			if (strcmp(word, controller_names[c]) == 0)
				host->controller[c] = true;
}

/* Copies line number n (from 0) of text into out. */
static void nth_line(const char *text, int n, char *out, size_t size)
{
	const char *line = NULL;
	size_t len = 0;
	for (int i = 0; i <= n && (line = next_line(&text, &len)); i++)
		;
	snprintf(out, size, "%.*s", line ? (int)len : 0, line ? line : "");
}

void podman_host_query(const char *podman, struct podman_host *host)
{
	char *argv[] = {(char *)podman, "info", "--format",
		"{{.Host.Security.Rootless}}\n{{.Host.CgroupsVersion}}\n{{.Host.CgroupControllers}}\n"
		"{{.Host.OCIRuntime.Name}}\n{{.Store.GraphDriverName}}",
		NULL};
	struct capture cap;
	char rootless[16], controllers[256];

	*host = (struct podman_host){.rootless = ROOTLESS_UNKNOWN};
	if (capture_command(argv, PODMAN_INFO_TIMEOUT_MS, &cap) < 0) {
		snprintf(host->detail, sizeof host->detail, "cannot start %s", podman);
		return;
	}
	const char *said = cap.out.data ? cap.out.data : "";
	nth_line(said, 0, rootless, sizeof rootless);
	if (cap.timed_out) {
		snprintf(host->detail, sizeof host->detail, "podman info did not answer within %d s",
			PODMAN_INFO_TIMEOUT_MS / 1000);
	} else if (cap.status != 0) {
		const char *why = cap.err.data ? cap.err.data : "";
		snprintf(host->detail, sizeof host->detail, "podman info exited with status %d: %.*s",
			cap.status, (int)strcspn(why, "\n"), why);
	} else if (strcmp(rootless, "true") == 0) {
		host->rootless = ROOTLESS_TRUE;
	} else if (strcmp(rootless, "false") == 0) {
		host->rootless = ROOTLESS_FALSE;
	} else {
		snprintf(host->detail, sizeof host->detail,
			"podman info printed '%s', not true or false", rootless);
	}
	if (host->rootless != ROOTLESS_UNKNOWN) {
		nth_line(said, 1, host->cgroups, sizeof host->cgroups);
		nth_line(said, 2, controllers, sizeof controllers);
		parse_controllers(host, controllers);
		nth_line(said, 3, host->runtime, sizeof host->runtime);
		nth_line(said, 4, host->storage_driver, sizeof host->storage_driver);
	}
	capture_free(&cap);
}

const char *controller_name(enum cgroup_controller c)
{
	return controller_names[c];
}
