/* sage-sandbox.c: the command line: subcommands, options and environment,
 * reading the code, and printing results as text or JSON. */

#include "json.h"
#include "sandbox.h"
#include "selftest.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>


struct options {
	struct config cfg;
	bool json;
	const char *file; /* run: NULL or "-" for stdin */
};

static void print_usage(FILE *out)
{
	fprintf(out,
		"Usage: sage-sandbox run [OPTIONS] [FILE]    run Sage code from FILE or stdin\n"
		"       sage-sandbox self-test [OPTIONS]     verify the sandbox from inside it\n"
		"       sage-sandbox status [OPTIONS]        diagnose podman, image and settings\n"
		"       sage-sandbox cleanup [OPTIONS]       remove containers a killed run left\n"
		"       sage-sandbox --help | --version\n"
		"\n"
		"Options (each also set by its environment variable; a flag beats the\n"
		"environment, which beats the default):\n");
	for (int id = 0; id < SETTING_COUNT; id++) {
		const struct setting *s = &settings[id];
		fprintf(out, "  %s %s ($%s)\n        %s\n        allowed: %s\n        default: %s\n",
			s->flag, s->metavar, s->env, s->help, s->allowed, s->fallback);
	}
	fprintf(out,
		"  %s\n        print one JSON object on stdout (see sage-sandbox(5))\n"
		"\n"
		"Code is at most %d bytes and may not contain a NUL byte.\n"
		"Exit status: Sage's own (0, 1, 128+N for signal N); %d output limit;\n"
		"%d timeout; %d not run (bad usage, podman missing or not rootless, no image).\n"
		"See sage-sandbox(1).\n",
		"--json", MAX_CODE_BYTES, EXIT_OUTPUT_LIMIT, EXIT_TIMEOUT, EXIT_REFUSED);
}

/* ---- errors ------------------------------------------------------------- */

static void write_sandbox_summary(struct json *j, const struct config *cfg);

/* Says why nothing was run: one line on stderr, and the JSON object too when
 * asked for. Returns the exit status. */
static int report_error(const struct error *err, bool json, const struct config *cfg)
{
	fprintf(stderr, "sage-sandbox: %s%s%s\n", err->message, err->hint[0] ? "; " : "",
		err->hint);
	if (json) {
		struct json j = {.out = stdout};
		json_begin_object(&j);
		json_key(&j, "ok");
		json_bool(&j, false);
		json_key(&j, "exit_code");
		json_integer(&j, err->status);
		json_key(&j, "error");
		json_cstring(&j, err->message);
		json_key(&j, "hint");
		json_cstring(&j, err->hint);
		if (cfg) {
			json_key(&j, "sandbox");
			write_sandbox_summary(&j, cfg);
		}
		json_end_object(&j);
	}
	fflush(stdout);
	return err->status;
}

/* ---- options ------------------------------------------------------------ */

static const char usage_hint[] = "see sage-sandbox --help";

/* A strict parse: an unknown option, a missing value, a repeated option or
 * a value out of range is an error that names the option. Flags are checked
 * first, then only the environment variables they do not override. */
static int parse_options(int argc, char **argv, bool takes_file, struct options *o,
		struct error *err)
{
	const char *flag_value[SETTING_COUNT] = {0};
	bool only_positional = false;
	int json_seen = 0;
	char why[256];

	/* Known before anything can fail, so that every error is JSON too. */
	for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "--json") == 0)
			o->json = true;

	for (int i = 0; i < argc; i++) {
		const char *arg = argv[i];
		if (only_positional || arg[0] != '-' || strcmp(arg, "-") == 0) {
			if (!takes_file || o->file) {
				error_set(err, EXIT_REFUSED, usage_hint, "unexpected argument '%s'", arg);
				return -1;
			}
			o->file = arg;
			continue;
		}
		if (strcmp(arg, "--") == 0) {
			only_positional = true;
			continue;
		}
		if (strcmp(arg, "--json") == 0) {
			if (json_seen++) {
				error_set(err, EXIT_REFUSED, usage_hint, "option --json given twice");
				return -1;
			}
			continue;
		}
		size_t name_len = strcspn(arg, "=");
		int id;
		for (id = 0; id < SETTING_COUNT; id++)
			if (strlen(settings[id].flag) == name_len &&
			    strncmp(arg, settings[id].flag, name_len) == 0)
				break;
		if (id == SETTING_COUNT) {
			error_set(err, EXIT_REFUSED, usage_hint, "unknown option '%.*s'",
				(int)name_len, arg);
			return -1;
		}
		if (flag_value[id]) {
			error_set(err, EXIT_REFUSED, usage_hint, "option %s given twice",
				settings[id].flag);
			return -1;
		}
		if (arg[name_len] == '=') {
			flag_value[id] = arg + name_len + 1;
		} else if (i + 1 < argc) {
			flag_value[id] = argv[++i];
		} else {
			error_set(err, EXIT_REFUSED, usage_hint, "option %s needs a value: %s",
				settings[id].flag, settings[id].allowed);
			return -1;
		}
	}

	if (config_init(&o->cfg, flag_value, why, sizeof why) < 0) {
		error_set(err, EXIT_REFUSED, usage_hint, "%s", why);
		return -1;
	}
	return 0;
}

/* ---- code --------------------------------------------------------------- */

/* Reads at most MAX_CODE_BYTES; refuses more, and refuses NUL bytes (Sage
 * would see a different program than the caller wrote). */
static char *read_code(const char *file, size_t *len, struct error *err)
{
	bool from_stdin = !file || strcmp(file, "-") == 0;
	const char *name = from_stdin ? "standard input" : file;
	int fd = from_stdin ? 0 : open(file, O_RDONLY | O_CLOEXEC);
	char *code = malloc(MAX_CODE_BYTES + 2);
	size_t n = 0;

	if (!code)
		abort();
	if (fd < 0) {
		error_set(err, EXIT_REFUSED, "name a readable file, or - for standard input",
			"cannot open %s: %s", file, strerror(errno));
		free(code);
		return NULL;
	}
	while (n <= MAX_CODE_BYTES) {
		ssize_t r = read(fd, code + n, MAX_CODE_BYTES + 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			error_set(err, EXIT_REFUSED, "name a readable file, or - for standard input",
				"cannot read %s: %s", name, strerror(errno));
			goto fail;
		}
		if (r == 0)
			break;
		n += (size_t)r;
	}
	if (n > MAX_CODE_BYTES) {
		error_set(err, EXIT_REFUSED, "split the computation or read data from a smaller file",
			"code from %s is larger than %d bytes", name, MAX_CODE_BYTES);
		goto fail;
	}
	char *nul = memchr(code, '\0', n);
	if (nul) {
		error_set(err, EXIT_REFUSED, "Sage code is text; remove the NUL byte",
			"code from %s contains a NUL byte at offset %zu", name, (size_t)(nul - code));
		goto fail;
	}
	if (!from_stdin)
		close(fd);
	code[n] = '\0';
	*len = n;
	return code;
fail:
	if (!from_stdin)
		close(fd);
	free(code);
	return NULL;
}

/* ---- output ------------------------------------------------------------- */

static const char *signal_name(int sig, char *buf, size_t size)
{
	const char *abbrev = sig > 0 ? sigabbrev_np(sig) : NULL;
	if (abbrev)
		snprintf(buf, size, "SIG%s", abbrev);
	else
		snprintf(buf, size, "signal %d", sig);
	return buf;
}

static void write_setting_value(struct json *j, const struct config *cfg, int id)
{
	switch (settings[id].kind) {
	case KIND_INTEGER:
		json_integer(j, cfg->number[id]);
		break;
	case KIND_MILLI:
		json_decimal(j, cfg->number[id]);
		break;
	default:
		json_cstring(j, cfg->value[id]);
	}
}

static void write_sandbox_summary(struct json *j, const struct config *cfg)
{
	json_begin_object(j);
	for (int id = 0; id < SETTING_COUNT; id++) {
		json_key(j, settings[id].key);
		write_setting_value(j, cfg, id);
	}
	json_key(j, "network");
	json_cstring(j, "none");
	json_key(j, "root_filesystem");
	json_cstring(j, "read-only");
	json_key(j, "writable");
	json_cstring(j, "/tmp (tmpfs, 256 MiB)");
	json_key(j, "host_mounts");
	json_cstring(j, "none");
	json_key(j, "user");
	json_cstring(j, "sage");
	json_key(j, "capabilities");
	json_cstring(j, "none");
	json_key(j, "no_new_privileges");
	json_bool(j, true);
	json_key(j, "pull");
	json_cstring(j, "never");
	json_end_object(j);
}

static void write_run_fields(struct json *j, const struct run_result *r, const struct config *cfg)
{
	char name[32];
	json_key(j, "exit_code");
	json_integer(j, r->exit_code);
	json_key(j, "signal");
	if (r->signal)
		json_cstring(j, signal_name(r->signal, name, sizeof name));
	else
		json_null(j);
	json_key(j, "timed_out");
	json_bool(j, r->timed_out);
	json_key(j, "output_limit_exceeded");
	json_bool(j, r->output_limit_exceeded);
	json_key(j, "stdout");
	json_string(j, r->out.data ? r->out.data : "", r->out.len);
	json_key(j, "stderr");
	json_string(j, r->err.data ? r->err.data : "", r->err.len);
	json_key(j, "truncated");
	json_begin_object(j);
	json_key(j, "stdout");
	json_bool(j, r->out_truncated);
	json_key(j, "stderr");
	json_bool(j, r->err_truncated);
	json_key(j, "max_bytes_per_stream");
	json_integer(j, cfg->number[SET_OUTPUT_LIMIT] * 1024);
	json_end_object(j);
	json_key(j, "duration_ms");
	json_integer(j, r->duration_ms);
	if (r->interrupted_by) {
		json_key(j, "error");
		json_cstring(j, signal_name(r->interrupted_by, name, sizeof name));
	}
}

/* What text mode adds on stderr when sage-sandbox, not Sage, ended the run. */
static void say_why_stopped(const struct run_result *r, const struct config *cfg)
{
	char name[32];
	if (r->timed_out)
		fprintf(stderr, "sage-sandbox: timed out after %ld s; the container was stopped\n",
			cfg->number[SET_TIMEOUT]);
	else if (r->output_limit_exceeded)
		fprintf(stderr,
			"sage-sandbox: %s passed the output limit of %ld KiB; the container was stopped\n",
			r->out_truncated ? "stdout" : "stderr", cfg->number[SET_OUTPUT_LIMIT]);
	else if (r->interrupted_by && r->interrupted_by != SIGPIPE)
		fprintf(stderr, "sage-sandbox: interrupted by %s; the container was stopped\n",
			signal_name(r->interrupted_by, name, sizeof name));
}

/* ---- commands ----------------------------------------------------------- */

/* Runs code in the sandbox that preflight checked, with terminating signals
 * watched. Returns the exit status, or -1 with err set when it did not run. */
static int run_code(const struct options *o, const struct podman_host *host, const char *code,
		size_t len, enum output_mode mode, struct run_result *res, struct error *err)
{
	if (signals_watch() < 0) {
		error_set(err, EXIT_REFUSED, NULL, "cannot watch signals: %s", strerror(errno));
		return -1;
	}
	return sandbox_run(&o->cfg, host, code, len, mode, res, err) < 0 ? -1 : res->exit_code;
}

static int cmd_run(int argc, char **argv)
{
	struct options o = {0};
	struct error err;
	struct run_result res;
	size_t len;
	char *code;

	if (parse_options(argc, argv, true, &o, &err) < 0)
		return report_error(&err, o.json, NULL);
	if (!(code = read_code(o.file, &len, &err)))
		return report_error(&err, o.json, &o.cfg);
	struct podman_host host;
	int status = sandbox_preflight(&o.cfg, &host, &err);
	if (status == 0)
		status = run_code(&o, &host, code, len, o.json ? OUTPUT_CAPTURE : OUTPUT_STREAM, &res,
			&err);
	free(code);
	if (status < 0)
		return report_error(&err, o.json, &o.cfg);
	if (o.json) {
		struct json j = {.out = stdout};
		json_begin_object(&j);
		json_key(&j, "ok");
		json_bool(&j, res.exit_code == 0);
		write_run_fields(&j, &res, &o.cfg);
		json_key(&j, "sandbox");
		write_sandbox_summary(&j, &o.cfg);
		json_end_object(&j);
	} else {
		say_why_stopped(&res, &o.cfg);
	}
	run_result_free(&res);
	return status;
}

static int cmd_self_test(int argc, char **argv)
{
	struct options o = {0};
	struct error err;
	struct run_result res;
	struct podman_host host;
	struct buffer code = {0};
	struct self_test t;

	if (parse_options(argc, argv, false, &o, &err) < 0)
		return report_error(&err, o.json, NULL);
	if (sandbox_preflight(&o.cfg, &host, &err) < 0)
		return report_error(&err, o.json, &o.cfg);
	self_test_code(&o.cfg, &host, &code);
	int status = run_code(&o, &host, code.data, code.len, OUTPUT_CAPTURE, &res, &err);
	buffer_free(&code);
	if (status < 0)
		return report_error(&err, o.json, &o.cfg);
	self_test_parse(res.out.data ? res.out.data : "", status, &t);

	int counts[3] = {0}; /* passed, failed, skipped */
	for (int i = 0; i < t.count; i++)
		counts[t.checks[i].outcome[0] == 'P' ? 0 : t.checks[i].outcome[0] == 'S' ? 2 : 1]++;
	if (o.json) {
		struct json j = {.out = stdout};
		json_begin_object(&j);
		json_key(&j, "ok");
		json_bool(&j, !t.failed);
		json_key(&j, "checks");
		json_begin_array(&j);
		for (int i = 0; i < t.count; i++) {
			json_begin_object(&j);
			json_key(&j, "name");
			json_cstring(&j, t.checks[i].name);
			json_key(&j, "outcome");
			json_cstring(&j, t.checks[i].outcome);
			json_key(&j, "detail");
			json_cstring(&j, t.checks[i].detail);
			json_end_object(&j);
		}
		json_end_array(&j);
		json_key(&j, "run");
		json_begin_object(&j);
		write_run_fields(&j, &res, &o.cfg);
		json_end_object(&j);
		json_key(&j, "sandbox");
		write_sandbox_summary(&j, &o.cfg);
		json_end_object(&j);
	} else {
		for (int i = 0; i < t.count; i++)
			printf("%-4s  %-17s %s\n", t.checks[i].outcome, t.checks[i].name,
				t.checks[i].detail);
		if (t.failed) {
			say_why_stopped(&res, &o.cfg);
			if (res.err.len)
				fprintf(stderr, "sage-sandbox: Sage's stderr:\n%s", res.err.data);
		}
		printf("self-test %s: %d passed, %d failed, %d skipped\n",
			t.failed ? "FAILED" : "passed", counts[0], counts[1], counts[2]);
	}
	run_result_free(&res);
	if (res.interrupted_by)
		return status;
	return t.failed ? 1 : 0;
}

static int cmd_cleanup(int argc, char **argv)
{
	struct options o = {0};
	struct error err;
	struct buffer removed = {0};

	if (parse_options(argc, argv, false, &o, &err) < 0)
		return report_error(&err, o.json, NULL);
	int count = sandbox_cleanup(&o.cfg, &removed, &err);
	if (count < 0)
		return report_error(&err, o.json, &o.cfg);
	if (o.json) {
		struct json j = {.out = stdout};
		json_begin_object(&j);
		json_key(&j, "ok");
		json_bool(&j, true);
		json_key(&j, "removed");
		json_begin_array(&j);
		const char *cursor = removed.data, *line;
		size_t len;
		while ((line = next_line(&cursor, &len)))
			json_string(&j, line, len);
		json_end_array(&j);
		json_end_object(&j);
	} else {
		printf("%sremoved %d container%s left by killed runs\n", removed.data ? removed.data : "",
			count, count == 1 ? "" : "s");
	}
	buffer_free(&removed);
	return 0;
}

static const char not_enforced_fix[] =
	"on cgroup v2, delegate the controller to the user (systemd: Delegate=yes for "
	"user@.service); rootless podman on cgroup v1 cannot apply it";

static int cmd_status(int argc, char **argv)
{
	struct options o = {0};
	struct error err;
	struct podman_host host = {.rootless = ROOTLESS_UNKNOWN};
	char version[128] = "", digest[128] = "";
	bool image_available = false;
	const char *hint = NULL;
	static const char *const rootless_text[] = {"true", "false", "unknown"};

	if (parse_options(argc, argv, false, &o, &err) < 0)
		return report_error(&err, o.json, NULL);

	char *podman = find_executable(o.cfg.value[SET_PODMAN]);
	if (podman) {
		char *version_argv[] = {podman, "--version", NULL};
		struct capture cap;
		if (capture_command(version_argv, 20000, &cap) == 0 && cap.status == 0 &&
		    cap.out.data) {
			const char *v = strstr(cap.out.data, "version ");
			v = v ? v + strlen("version ") : cap.out.data;
			snprintf(version, sizeof version, "%.*s", (int)strcspn(v, "\n"), v);
		}
		capture_free(&cap);
		podman_host_query(podman, &host);
		char *image_argv[] = {podman, "image", "inspect", "--format={{.Digest}}",
			(char *)o.cfg.value[SET_IMAGE], NULL};
		image_available = capture_command(image_argv, 30000, &cap) == 0 && cap.status == 0;
		if (image_available && cap.out.data)
			snprintf(digest, sizeof digest, "%.*s", (int)strcspn(cap.out.data, "\n"),
				cap.out.data);
		capture_free(&cap);
	}
	if (!podman)
		hint = podman_install_hint;
	else if (host.rootless == ROOTLESS_FALSE)
		hint = "run sage-sandbox as an unprivileged user (not root, not sudo)";
	else if (host.rootless == ROOTLESS_UNKNOWN)
		hint = "check that podman works for this user: podman info";
	else if (!image_available)
		hint = image_hint;
	bool ready = !hint;
	const char *warning = strcmp(host.storage_driver, "vfs") == 0 ?
		"storage driver vfs copies the whole image for every run; set driver = \"overlay\" "
		"in ~/.config/containers/storage.conf" : NULL;

	if (o.json) {
		struct json j = {.out = stdout};
		json_begin_object(&j);
		json_key(&j, "ok");
		json_bool(&j, ready);
		json_key(&j, "podman");
		json_cstring(&j, podman);
		json_key(&j, "podman_version");
		json_cstring(&j, version[0] ? version : NULL);
		json_key(&j, "rootless");
		json_cstring(&j, rootless_text[host.rootless]);
		if (host.detail[0]) {
			json_key(&j, "rootless_detail");
			json_cstring(&j, host.detail);
		}
		json_key(&j, "cgroups");
		json_cstring(&j, host.cgroups[0] ? host.cgroups : NULL);
		json_key(&j, "oci_runtime");
		json_cstring(&j, host.runtime[0] ? host.runtime : NULL);
		json_key(&j, "storage_driver");
		json_cstring(&j, host.storage_driver[0] ? host.storage_driver : NULL);
		json_key(&j, "image");
		json_cstring(&j, o.cfg.value[SET_IMAGE]);
		json_key(&j, "image_available");
		json_bool(&j, image_available);
		json_key(&j, "image_digest");
		json_cstring(&j, digest[0] ? digest : NULL);
		if (warning) {
			json_key(&j, "warning");
			json_cstring(&j, warning);
		}
		json_key(&j, "settings");
		json_begin_object(&j);
		for (int id = 0; id < SETTING_COUNT; id++) {
			const char *by[MAX_ENFORCERS];
			int n = setting_enforcement(id, &host, by);
			json_key(&j, settings[id].key);
			json_begin_object(&j);
			json_key(&j, "value");
			write_setting_value(&j, &o.cfg, id);
			json_key(&j, "source");
			json_cstring(&j, setting_source_name(o.cfg.source[id]));
			if (n >= 0) {
				json_key(&j, "enforced_by");
				json_begin_array(&j);
				for (int i = 0; i < n; i++)
					json_cstring(&j, by[i]);
				json_end_array(&j);
			}
			json_end_object(&j);
		}
		json_end_object(&j);
		if (hint) {
			json_key(&j, "hint");
			json_cstring(&j, hint);
		}
		json_end_object(&j);
	} else {
		printf("podman:    %s%s%s%s\n", podman ? podman : "NOT FOUND",
			version[0] ? " (version " : "", version, version[0] ? ")" : "");
		printf("rootless:  %s%s%s\n", rootless_text[host.rootless],
			host.detail[0] ? ": " : "", host.detail);
		printf("cgroups:   %s\n", host.cgroups[0] ? host.cgroups : "unknown");
		printf("runtime:   %s\n", host.runtime[0] ? host.runtime : "unknown");
		printf("storage:   %s\n", host.storage_driver[0] ? host.storage_driver : "unknown");
		printf("image:     %s (%s%s%s)\n", o.cfg.value[SET_IMAGE],
			image_available ? "present" : "NOT PRESENT", digest[0] ? ", " : "", digest);
		if (warning)
			printf("warning:   %s\n", warning);
		printf("settings:\n");
		for (int id = 0; id < SETTING_COUNT; id++) {
			const char *by[MAX_ENFORCERS];
			int n = setting_enforcement(id, &host, by);
			printf("  %-17s %-35s %-12s", settings[id].flag, o.cfg.value[id],
				setting_source_name(o.cfg.source[id]));
			if (n == 0)
				printf(" NOT ENFORCED on this host: %s", not_enforced_fix);
			for (int i = 0; i < n; i++)
				printf("%s%s", i ? ", " : " enforced by ", by[i]);
			printf("\n");
		}
		printf("ready:     %s\n", ready ? "yes" : "no");
		if (hint)
			printf("fix:       %s\n", hint);
	}
	free(podman);
	return ready ? 0 : 1;
}

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{"run", cmd_run},
	{"self-test", cmd_self_test},
	{"status", cmd_status},
	{"cleanup", cmd_cleanup},
};

int main(int argc, char **argv)
{
	/* With 0, 1 or 2 closed, the pipes and files opened later could take
	 * their numbers and be mistaken for them in the child. */
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			return EXIT_REFUSED;
	if (argc < 2) {
		print_usage(stderr);
		return EXIT_REFUSED;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		print_usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("sage-sandbox %s\n", SAGE_SANDBOX_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		for (int a = 2; a < argc && strcmp(argv[a], "--") != 0; a++) {
			if (strcmp(argv[a], "--help") == 0 || strcmp(argv[a], "-h") == 0) {
				print_usage(stdout);
				return 0;
			}
		}
		int status = commands[i].run(argc - 2, argv + 2);
		if (fflush(stdout) != 0 && status == 0)
			status = EXIT_REFUSED;
		return status;
	}
	fprintf(stderr, "sage-sandbox: unknown command '%s'; use run, self-test, status or cleanup "
			"(see sage-sandbox --help)\n", argv[1]);
	return EXIT_REFUSED;
}
