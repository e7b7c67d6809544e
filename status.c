/* status.c: `sage-sandbox status`: gathers the host check's value and what
 * only status asks, words the one problem in the way (and its fix), and
 * prints it all as text or JSON. */
#include "status.h"
#include "names.h"
#include "batch.h"
#include "buildid.h"
#include "client.h"
#include "json.h"
#include "oneshot.h"
#include "process.h"
#include "result.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PODMAN_ASK_MS 20000

static const char not_enforced_fix[] =
	"on cgroup v2, delegate the controller to the user (systemd: Delegate=yes for "
	"user@.service); rootless podman on cgroup v1 cannot apply it";

/* One podman command's first line of output, or "" (status 0 only);
 * where it failed, the last line of its errors (a WARN line may come
 * first), "" where it said nothing, and *no_image where it said the image
 * is not there. */
static bool ask_podman(char *const argv[], char *const envp[], char *out, size_t size,
		char *errors, size_t errors_size, bool *no_image)
{
	struct capture cap;
	bool ok = capture_command(argv, envp, PODMAN_ASK_MS, &cap) == 0 && cap.status == 0;
	const char *said = cap.out.data ? cap.out.data : "";
	snprintf(out, size, "%.*s", (int)strcspn(said, "\n"), said);
	if (errors) {
		size_t len = 0;
		const char *why = cap.err.data ? last_line(cap.err.data, cap.err.len, &len) : "";
		if (cap.timed_out)
			snprintf(errors, errors_size, "it did not answer in time");
		else
			snprintf(errors, errors_size, "%.*s", (int)len, why);
	}
	if (no_image)
		*no_image = !ok && podman_said_no_image(cap.err.data);
	capture_free(&cap);
	return ok;
}

/* A remote service named by the environment: tried, and what it said. */
static void try_remote(struct status_report *s)
{
	extern char **environ;
	struct argv_builder a = {0};
	char said[128], errors[256];
	arg_add(&a, "%s", s->host.podman);
	arg_add(&a, "--remote");
	arg_add(&a, "info");
	arg_add(&a, "--format={{.Host.ServiceIsRemote}}");
	if (ask_podman(a.arg, environ, said, sizeof said, errors, sizeof errors, NULL))
		snprintf(s->remote_answer, sizeof s->remote_answer, "the service answers");
	else
		snprintf(s->remote_answer, sizeof s->remote_answer, "the service does not answer: %s",
			errors[0] ? errors : "no message");
	args_free(&a);
}

/* Whether the run's own uid, not only the image's user, can start Sage: a
 * real sandbox runs an empty program. */
static void try_sage(struct status_report *s)
{
	static const char nothing[] = "pass\n";
	struct oneshot run = {.cfg = s->cfg, .started_at = loop_now_ms(), .code = nothing,
		.code_len = sizeof nothing - 1, .for_status = true};
	s->sage_asked = true;
	if (oneshot_begin(&run) < 0 || oneshot_run(&run) < 0)
		s->sage_refusal = run.err;
	else if (run.result->exit_code != 0)
		error_set(&s->sage_refusal, EXIT_REFUSED, "see 'sage-sandbox self-test'",
			"an empty program exited with status %d in the sandbox", run.result->exit_code);
	else
		s->sage_starts = true;
	oneshot_end(&run);
}

void status_from_host(const struct config *cfg, const struct host *h, struct status_report *s)
{
	*s = (struct status_report){.cfg = cfg, .host = *h};
	/* The host check's image probe found the image, or said it is not
	 * there; a probe that did not run (podman refused first) says nothing. */
	if (h->image_checked || (h->refusal.status && strstr(h->refusal.message, "not present"))) {
		s->image_asked = true;
		s->image_present = h->image_checked && !h->refusal.status;
	}
}

void status_gather(const struct config *cfg, struct status_report *s)
{
	struct host h;
	host_check_now(cfg, true, &h);
	status_from_host(cfg, &h, s);
	if (!s->host.podman[0])
		return;
	struct argv_builder a = {0};
	podman_version_args(&a, s->host.podman);
	char said[128];
	if (ask_podman(a.arg, podman_environment(), said, sizeof said, NULL, 0, NULL))
		podman_version_parse(said, s->podman_version, sizeof s->podman_version);
	args_free(&a);
	if (s->host.remote[0])
		try_remote(s);
	/* Images are per user: root's podman looks in root's storage, not in
	 * the storage of the account that runs sage-sandbox. */
	if (geteuid() != 0 && !s->host.remote[0] &&
	    s->host.podman_host.rootless == ROOTLESS_TRUE) {
		podman_image_digest_args(&a, s->host.podman, cfg->value[SET_IMAGE]);
		char errors[256];
		bool no_image;
		s->image_present = ask_podman(a.arg, podman_environment(), s->image_digest,
			sizeof s->image_digest, errors, sizeof errors, &no_image);
		/* Only podman's own "no such image" says it is not there: a podman
		 * that fails otherwise, or says nothing, leaves it unknown. */
		s->image_asked = s->image_present || no_image;
		if (!s->image_asked)
			snprintf(s->image_failure, sizeof s->image_failure,
				"podman image inspect %s failed%s%s", cfg->value[SET_IMAGE],
				errors[0] ? ": " : " and said nothing", errors);
		args_free(&a);
	}
	if (s->image_present && !s->host.refusal.status)
		try_sage(s);
	s->server = client_server_status();
	json_t *build = json_object_get(s->server, "build");
	json_t *environment = json_object_get(s->server, "environment");
	char mine[65];
	podman_environment_digest(mine);
	if (json_is_string(build))
		json_object_set_new(s->server, "serves_this_build",
			json_boolean(strcmp(json_string_value(build), build_id()) == 0));
	if (json_is_string(build))
		json_object_set_new(s->server, "serves_this_environment",
			json_boolean(json_is_string(environment) &&
				strcmp(json_string_value(environment), mine) == 0));
}

void status_free(struct status_report *s)
{
	json_decref(s->server);
	s->server = NULL;
}

/* One line of text, as error_set makes a message: what podman printed,
 * a setting's value or a variable may hold a newline or a terminal's
 * escapes (attack helper 164); without the padding its last column may
 * have left. */
static void print_line(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void print_line(FILE *out, const char *fmt, ...)
{
	char shown[2048];
	va_list ap;
	va_start(ap, fmt);
	size_t len = printable_vformat(shown, sizeof shown, fmt, ap);
	va_end(ap);
	while (len && shown[len - 1] == ' ')
		len--;
	fprintf(out, "%.*s\n", (int)len, shown);
}

/* The server's line: who answers, what it keeps, and whether it serves
 * runs from here. */
static void print_server(FILE *out, json_t *server)
{
	const char *socket = json_string_value(json_object_get(server, "socket"));
	const char *problem_text = json_string_value(json_object_get(server, "problem"));
	if (!json_is_true(json_object_get(server, "answers"))) {
		print_line(out, "server:    none answers at %s%s%s; runs start cold (start one with "
				"sage-sandbox serve, or SAGE_SANDBOX_SERVER=start)", socket ? socket : "?",
			problem_text ? ": " : "", problem_text ? problem_text : "");
		return;
	}
	json_int_t pid = 0, up = 0, warm = 0, running = 0, queued = 0, served = 0, rss = 0;
	json_unpack(server, "{s?I, s?I, s?I, s?I, s?I, s?I, s?I}", "pid", &pid, "uptime_seconds",
		&up, "warm", &warm, "running", &running, "queued", &queued, "served", &served,
		"rss_kib", &rss);
	print_line(out, "server:    pid %lld at %s: up %lld s, %lld warm, %lld running, %lld queued, "
			"%lld served, its own RSS %lld MiB (stop: sage-sandbox serve --stop)",
		(long long)pid, socket, (long long)up, (long long)warm, (long long)running,
		(long long)queued, (long long)served, (long long)rss / 1024);
	if (json_is_false(json_object_get(server, "serves_this_build")))
		print_line(out, "           ANOTHER BUILD of sage-sandbox: a run from here goes cold and "
				"asks it to exit");
	else if (json_is_false(json_object_get(server, "serves_this_environment")))
		print_line(out, "           ANOTHER ENVIRONMENT for podman (PATH, HOME, XDG_*, "
				"CONTAINERS_*, TMPDIR, DBUS_SESSION_BUS_ADDRESS, CONTAINER_HOST): runs "
				"from here go cold");
}

/* The one problem in the way, and its fix; NULL when ready. */
static const char *problem(const struct status_report *s, const char **hint)
{
	const struct podman_host *ph = &s->host.podman_host;
	*hint = s->host.refusal.hint;
	if (!s->host.podman[0]) {
		/* Not found, or not a program this user may run: the host
		 * check's refusal (podman_executable) says which. */
		return s->host.refusal.message;
	}
	if (ph->as_root) {
		*hint = as_root_hint;
		return "sage-sandbox does not run as root";
	}
	if (s->host.remote[0])
		return s->host.refusal.message;
	if (ph->rootless == ROOTLESS_FALSE) {
		*hint = "run sage-sandbox as an unprivileged user (not root, not sudo)";
		return "podman is not rootless for this user";
	}
	/* With the podman in use, not a bare "podman info" (attack helper 162). */
	static char works[512];
	if (ph->rootless == ROOTLESS_UNKNOWN) {
		if (s->host.refusal.status && !ph->detail[0])
			return s->host.refusal.message; /* podman could not be started */
		podman_works_hint(works, sizeof works, s->host.podman, "info", NULL);
		*hint = podman_failed_hint(ph->detail, works);
		/* What it did: it may have answered, with a failure. */
		return ph->detail[0] ? ph->detail : "podman did not answer";
	}
	if (s->image_asked && !s->image_present) {
		*hint = image_hint;
		return "the image is not in this user's podman storage";
	}
	if (s->image_failure[0]) {
		podman_works_hint(works, sizeof works, s->host.podman, "image inspect",
			s->cfg->value[SET_IMAGE]);
		*hint = works;
		return s->image_failure;
	}
	if (s->host.refusal.status)
		return s->host.refusal.message;
	if (s->sage_asked && !s->sage_starts) {
		*hint = s->sage_refusal.hint;
		return s->sage_refusal.message;
	}
	*hint = NULL;
	return NULL;
}

bool status_ready(const struct status_report *s)
{
	const char *hint;
	return !problem(s, &hint);
}

static const char *image_words(const struct status_report *s)
{
	if (!s->host.podman[0])
		return "unknown (no podman)";
	if (s->host.podman_host.as_root)
		return "not checked: images are per user, and root's are not the ones sage-sandbox uses";
	if (s->image_failure[0])
		return "unknown: podman failed asking for it";
	if (!s->image_asked)
		return s->host.image_checked && !s->host.refusal.status ? "present" : "unknown";
	return s->image_present ? "present" : "NOT PRESENT";
}

static const char *storage_warning(const struct status_report *s)
{
	return strcmp(s->host.podman_host.storage_driver, "vfs") == 0 ?
		"storage driver vfs copies the whole image for every run; set driver = \"overlay\" "
		"in ~/.config/containers/storage.conf" : NULL;
}

/* ---- text -------------------------------------------------------------------- */

static void print_settings_text(FILE *out, const struct status_report *s)
{
	char line[1024];
	print_line(out, "settings:");
	for (int id = 0; id < SETTING_COUNT; id++) {
		const char *by[MAX_ENFORCERS];
		char value[32];
		int n = setting_enforcement(id, &s->host.podman_host, by);
		if (settings[id].server)
			continue;
		int at = snprintf(line, sizeof line, "  %-18s %-35s %-12s", settings[id].flag,
			setting_text(s->cfg, id, value, sizeof value),
			setting_source_name(s->cfg->source[id]));
		if (n == 0)
			at += snprintf(line + at, sizeof line - at, " NOT ENFORCED on this host: %s",
				not_enforced_fix);
		for (int i = 0; i < n && at < (int)sizeof line; i++)
			at += snprintf(line + at, sizeof line - at, "%s%s",
				i ? ", " : " enforced by ", by[i]);
		print_line(out, "%s", line);
	}
}

void status_print_text(FILE *out, const struct status_report *s)
{
	static const char *const rootless_text[] = {"yes", "no", "unknown"};
	const struct podman_host *ph = &s->host.podman_host;
	const char *hint, *why = problem(s, &hint);
	/* Not found, or there and not a program this user may run: the
	 * refusal says which (attack helper 162). */
	print_line(out, "podman:    %s%s%s%s", s->host.podman[0] ? s->host.podman :
		s->host.refusal.status ? s->host.refusal.message : "NOT FOUND",
		s->podman_version[0] ? " (version " : "", s->podman_version,
		s->podman_version[0] ? ")" : "");
	if (s->host.remote[0])
		print_line(out, "remote:    %s%s%s", s->host.remote, s->remote_answer[0] ? "; " : "",
			s->remote_answer);
	print_line(out, "rootless:  %s%s%s", rootless_text[ph->rootless], ph->detail[0] ? ": " : "",
		ph->detail);
	print_line(out, "cgroups:   %s", ph->cgroups[0] ? ph->cgroups : "unknown");
	print_line(out, "runtime:   %s", ph->runtime[0] ? ph->runtime : "unknown");
	print_line(out, "storage:   %s", ph->storage_driver[0] ? ph->storage_driver : "unknown");
	print_line(out, "image:     %s (%s%s%s)", s->cfg->value[SET_IMAGE], image_words(s),
		s->image_digest[0] ? ", " : "", s->image_digest);
	if (s->host.image_checked && !s->host.refusal.status) {
		const struct sage_image *im = &s->host.image;
		print_line(out, "sage:      %s%s", im->sage_version,
			!s->sage_asked || s->sage_starts ? "" : " (DOES NOT START in the sandbox)");
		print_line(out, "python:    %s (Python %s)", im->python, im->python_version);
		if (im->gid > 0)
			print_line(out, "user:      %s, uid %ld, gid %ld in the image; runs get gid %ld as "
				"a supplementary group", im->user, im->uid, im->gid, im->gid);
		else
			print_line(out, "user:      %s, uid %ld, gid %ld in the image; runs get no "
				"supplementary group (never root's)", im->user, im->uid, im->gid);
	}
	if (storage_warning(s))
		print_line(out, "warning:   %s", storage_warning(s));
	char jobs_why[160];
	batch_default_jobs(s->cfg, jobs_why, sizeof jobs_why);
	print_line(out, "batch:     --jobs %s", jobs_why);
	print_settings_text(out, s);
	if (s->server)
		print_server(out, s->server);
	print_line(out, "ready:     %s%s%s", why ? "no" : "yes", why ? ": " : "", why ? why : "");
	if (hint && hint[0])
		print_line(out, "fix:       %s", hint);
}

/* ---- JSON ------------------------------------------------------------------------ */

static void write_sage(struct json *j, const struct status_report *s)
{
	const struct sage_image *im = &s->host.image;
	jw_key(j, "sage");
	if (!s->host.image_checked || s->host.refusal.status) {
		jw_null(j);
		return;
	}
	jw_begin_object(j);
	jw_key(j, "version");
	jw_cstring(j, im->sage_version);
	jw_key(j, "python");
	jw_cstring(j, im->python);
	jw_key(j, "python_version");
	jw_cstring(j, im->python_version);
	jw_key(j, "image_user");
	jw_cstring(j, im->user);
	jw_key(j, "image_uid");
	jw_integer(j, im->uid);
	jw_key(j, "image_gid");
	jw_integer(j, im->gid);
	jw_key(j, "starts");
	if (s->sage_asked)
		jw_bool(j, s->sage_starts);
	else
		jw_null(j);
	jw_end_object(j);
}

static void write_settings(struct json *j, const struct status_report *s)
{
	jw_key(j, "settings");
	jw_begin_object(j);
	for (int id = 0; id < SETTING_COUNT; id++) {
		const char *by[MAX_ENFORCERS];
		int n = setting_enforcement(id, &s->host.podman_host, by);
		if (settings[id].server)
			continue;
		jw_key(j, settings[id].key);
		jw_begin_object(j);
		jw_key(j, "value");
		write_setting_value(j, s->cfg, id);
		jw_key(j, "source");
		jw_cstring(j, setting_source_name(s->cfg->source[id]));
		if (n >= 0) {
			jw_key(j, "enforced_by");
			jw_begin_array(j);
			for (int i = 0; i < n; i++)
				jw_cstring(j, by[i]);
			jw_end_array(j);
		}
		jw_end_object(j);
	}
	jw_end_object(j);
}

void status_print_json(FILE *out, const struct status_report *s)
{
	const struct podman_host *ph = &s->host.podman_host;
	const char *hint, *why = problem(s, &hint);
	struct json j = {.out = out};
	char sentence[640];
	snprintf(sentence, sizeof sentence, "not ready: %s", why ? why : "");
	jw_begin_object(&j);
	write_json_header(&j, !why, why ? 1 : 0, why ? sentence : NULL);
	jw_key(&j, "podman");
	jw_cstring(&j, s->host.podman[0] ? s->host.podman : NULL);
	jw_key(&j, "podman_version");
	jw_cstring(&j, s->podman_version[0] ? s->podman_version : NULL);
	jw_key(&j, "remote");
	jw_cstring(&j, s->host.remote[0] ? s->host.remote : NULL);
	jw_key(&j, "remote_answer");
	jw_cstring(&j, s->remote_answer[0] ? s->remote_answer : NULL);
	jw_key(&j, "rootless");
	if (ph->rootless == ROOTLESS_UNKNOWN)
		jw_null(&j);
	else
		jw_bool(&j, ph->rootless == ROOTLESS_TRUE);
	jw_key(&j, "rootless_detail");
	jw_cstring(&j, ph->detail[0] ? ph->detail : NULL);
	jw_key(&j, "cgroups");
	jw_cstring(&j, ph->cgroups[0] ? ph->cgroups : NULL);
	jw_key(&j, "oci_runtime");
	jw_cstring(&j, ph->runtime[0] ? ph->runtime : NULL);
	jw_key(&j, "storage_driver");
	jw_cstring(&j, ph->storage_driver[0] ? ph->storage_driver : NULL);
	jw_key(&j, "image");
	jw_cstring(&j, s->cfg->value[SET_IMAGE]);
	jw_key(&j, "image_available");
	if (s->image_asked)
		jw_bool(&j, s->image_present);
	else
		jw_null(&j);
	jw_key(&j, "image_digest");
	jw_cstring(&j, s->image_digest[0] ? s->image_digest : NULL);
	write_sage(&j, s);
	jw_key(&j, "warning");
	jw_cstring(&j, storage_warning(s));
	write_settings(&j, s);
	char jobs_why[160];
	jw_key(&j, "batch_jobs");
	jw_integer(&j, batch_default_jobs(s->cfg, jobs_why, sizeof jobs_why));
	jw_key(&j, "batch_jobs_detail");
	jw_cstring(&j, jobs_why);
	if (s->server) {
		char *text = json_dumps(s->server, JSON_COMPACT | JSON_SORT_KEYS);
		jw_key(&j, "server");
		jw_raw(&j, text);
		free(text);
	}
	jw_key(&j, "hint");
	jw_cstring(&j, hint && hint[0] ? hint : NULL);
	jw_end_object(&j);
}
