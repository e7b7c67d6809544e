/* sage-sandbox.c: the command line: subcommands, options and environment,
 * reading the code, and printing results as text or JSON. */

#include "batch.h"
#include "client.h"
#include "jobs.h"
#include "json.h"
#include "mcp.h"
#include "oneshot.h"
#include "process.h"
#include "result.h"
#include "rootless.h"
#include "sandbox.h"
#include "selftest.h"
#include "server.h"
#include "status.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

struct options {
	struct config cfg;
	bool json;
	bool show_control_chars;
	bool help;
	const char *file;  /* run: NULL or "-" for stdin */
	const char *output_dir; /* run: bring $SAGE_SANDBOX_OUT's files here */
	bool output_overwrite;
	bool no_server;    /* run, batch: never through the server */
	const char **inputs; /* run: --input PATH, each one */
	int input_count;
	char **args;       /* run: the code's arguments after FILE */
	int argc;
	/* batch's own options (FILE and args: its inputs) */
	const char *jobs, *order, *resume, *shard;
	bool fresh;
};

/* What each command is, for `help COMMAND` and `COMMAND --help`. */
static const struct command_help {
	const char *name, *synopsis, *summary;
	bool settings, run_options, server;
} command_help[] = {
	{"run", "run [OPTIONS] [FILE [ARG...]]", "run Sage code from FILE, or from stdin (no FILE, "
		"or -);\n        with FILE, stdin is the code's, and each ARG is in sys.argv[1:]",
		true, true, false},
	{"self-test", "self-test [OPTIONS]", "verify the sandbox from inside it", true, false,
		false},
	{"status", "status [OPTIONS]", "diagnose podman, the image and the settings", true, false,
		false},
	{"mcp", "mcp [OPTIONS]", "serve MCP on stdin and stdout, with warm sandboxes, for model\n"
		"        clients (LM Studio, Claude Desktop); see sage-sandbox-mcp(7)", true, false,
		true},
	{"batch", "batch [OPTIONS] [FILE...]", "run many jobs (JSON Lines from FILE or stdin, or .sage "
		"files) in\n        warm sandboxes, one JSON line of result each; see BATCH in "
		"sage-sandbox(1)", true, false, false},
	{"serve", "serve [--warm N] [--idle SECONDS] [OPTIONS] | serve --stop",
		"the per-user server that run and batch hand their runs to: warm\n"
		"        sandboxes, a fresh one for each run, the results of a cold run;\n"
		"        see SERVER in sage-sandbox(1)", true, false, false},
	{"cleanup", "cleanup [--podman PATH] [--json]",
		"remove containers that a killed sage-sandbox left", false, false, false},
	{"help", "help [COMMAND]", "print this help, or one command's", false, false, false},
};
#define COMMAND_COUNT (sizeof command_help / sizeof command_help[0])

static const struct command_help *find_help(const char *name)
{
	for (size_t i = 0; i < COMMAND_COUNT; i++)
		if (strcmp(command_help[i].name, name) == 0)
			return &command_help[i];
	return NULL;
}

/* The whole usage (command NULL) or one command's. Long: the help text,
 * in the order it is printed. */
static void print_usage(FILE *out, const struct command_help *command)
{
	bool settings_apply = !command || command->settings;
	for (size_t i = 0; i < COMMAND_COUNT; i++) {
		const struct command_help *c = &command_help[i];
		if (command && c != command)
			continue;
		fprintf(out, "%s sage-sandbox %s\n        %s\n", i == 0 || command ? "Usage:" : "      ",
			c->synopsis, c->summary);
	}
	if (!command)
		fprintf(out, "       sage-sandbox --help | --version\n");
	bool batch = command && strcmp(command->name, "batch") == 0;
	if (!command || command->run_options)
		fprintf(out, "\nOptions come before FILE; everything after FILE (or after --) is the\n"
			"code's. A repeated option: the last one wins (each --input adds).\n");
	else if (batch)
		fprintf(out, "\nOptions come before the first FILE; every argument after it is\n"
			"another FILE. A repeated option: the last one wins.\n");
	else
		fprintf(out, "\nA repeated option: the last one wins.\n");
	fprintf(out, "Each setting is also read from its environment variable and from the\n"
		"settings file ($SAGE_SANDBOX_SETTINGS, else $XDG_CONFIG_HOME/sage-sandbox/\n"
		"settings, that is ~/.config/sage-sandbox/settings: NAME = VALUE lines); a\n"
		"flag beats the environment, which beats the file, which beats the default.\n");
	for (int id = 0; id < SETTING_COUNT; id++) {
		const struct setting *s = &settings[id];
		if ((!settings_apply && id != SET_PODMAN) || (s->server && command && !command->server))
			continue;
		fprintf(out, "  %s %s ($%s)\n        %s%s\n        allowed: %s\n        default: %s\n",
			s->flag, s->metavar, s->env, s->server && !command ? "mcp only: " : "", s->help,
			s->allowed, s->fallback);
	}
	if (!command || (!command->server && !batch && strcmp(command->name, "serve") != 0))
		fprintf(out, "  --json\n        print one JSON object on stdout (see sage-sandbox(5))\n");
	if (!command || command->run_options)
		fprintf(out,
			"  --show-control-chars\n"
			"        on a terminal, pass the code's control characters and escape\n"
			"        sequences as they are; by default they are shown as ^[, \\x9b\n"
			"  --input PATH\n"
			"        copy a file, or a directory's tree, into the code's working\n"
			"        directory first (repeatable; regular files only, links inside a\n"
			"        directory refused; at most %d files, %llu MiB in all)\n"
			"  --output-dir DIR\n"
			"        bring the files the code left in $SAGE_SANDBOX_OUT into DIR, an\n"
			"        existing directory (regular files only, within --output-files,\n"
			"        --output-file-size and --output-size; also after a timeout)\n"
			"  --output-overwrite\n"
			"        replace files of the same name in DIR; by default they are kept\n"
			"        and the new ones are not saved\n"
			"  --no-server\n"
			"        never through the server (as $SAGE_SANDBOX_SERVER=off); by default\n"
			"        (auto) a run (and a batch) goes through the server when one answers,\n"
			"        and with SAGE_SANDBOX_SERVER=start it starts one in the background if\n"
			"        none does\n"
			"\n"
			"Code is at most %d bytes of UTF-8 and may not contain a NUL byte; the\n"
			"code's stdin is streamed, at most %llu MiB.\n",
			INFILES_MAX_FILES, INFILES_MAX_BYTES >> 20, MAX_CODE_BYTES, MAX_INPUT_BYTES >> 20);
	if (!command || strcmp(command->name, "batch") == 0)
		fprintf(out,
			"  --jobs N\n"
			"        batch only: sandboxes at once, 1 to %d (default: the cores, or\n"
			"        what the available memory holds at --memory each; see status)\n"
			"  --fresh\n"
			"        batch only: a container of its own for each job (as run), not\n"
			"        warm containers that serve job after job\n"
			"  --order input|completion\n"
			"        batch only: results in the input's order, or as jobs end\n"
			"        (default: completion)\n"
			"  --resume RESULTS\n"
			"        batch only: skip the jobs whose ids RESULTS (an earlier run's\n"
			"        output) holds as done\n"
			"  --shard K/N | auto | auto/N\n"
			"        batch only: take only the jobs whose ordinal is K modulo N; auto\n"
			"        reads Slurm's array task (or JOB_COMPLETION_INDEX, with /N)\n",
			BATCH_MAX_JOBS);
	if (batch)
		fprintf(out,
			"  --no-server\n"
			"        never through the server (as $SAGE_SANDBOX_SERVER=off); by default\n"
			"        (auto) a batch runs on the warm sandboxes of a server that answers,\n"
			"        when it keeps --jobs (or its default) of them; never with --fresh,\n"
			"        in a Slurm job, or with jobs from a terminal (see SERVER in\n"
			"        sage-sandbox(1))\n");
	if (!command || strcmp(command->name, "serve") == 0)
		fprintf(out,
			"  --warm N\n"
			"        serve only: sandboxes kept warm for each kind of settings, 0 to %d\n"
			"        (default: batch's --jobs, at most %d); runs past them wait their turn\n"
			"  --idle SECONDS\n"
			"        serve only: exit after that long with no client, 0 (never) to\n"
			"        %ld (default %d)\n"
			"  --stop\n"
			"        serve only: stop the server that answers, and wait until it has\n"
			"        (status 0; 1 when none answers; %d when it does not stop)\n",
			POOL_MAX_SIZE, POOL_MAX_SIZE, SERVER_IDLE_MAX_SECONDS, SERVER_IDLE_SECONDS,
			EXIT_REFUSED);
	if (command && strcmp(command->name, "batch") == 0) {
		fprintf(out,
			"\nJobs: one JSON object a line, {\"id\", \"code\", \"stdin\", \"args\",\n"
			"\"files\", \"timeout\", \"output_limit\", \"seed\"}, or .sage files (the id\n"
			"is the name); a line whose id an earlier one has is refused as a bad line.\n"
			"Results: one line per job, `run --json`'s object with id, source,\n"
			"line and attempts. Exit status: 0 every job ran (its own failure is in its\n"
			"line); %d some lines were bad or some jobs could not run; %d the batch\n"
			"was refused (nothing ran); 128+N stopped by signal N. See sage-sandbox(1).\n",
			BATCH_EXIT_SOME_NOT_RUN, EXIT_REFUSED);
		return;
	}
	if (command && strcmp(command->name, "serve") == 0) {
		fprintf(out,
			"\nIts socket: $XDG_RUNTIME_DIR/sage-sandbox/server.sock, or\n"
			"/tmp/sage-sandbox-UID/server.sock; its log on stderr. Exit status: 0\n"
			"after --stop, --idle or a client of another build; 128+N after signal\n"
			"N; %d when it cannot start (see its line). See SERVER in\n"
			"sage-sandbox(1).\n", EXIT_REFUSED);
		return;
	}
	if (command && command->server) {
		fprintf(out,
			"\nFor mcp, --timeout is the longest a call may ask for, and its default;\n"
			"--output-limit is at most %d, so that an answer fits MCP's 10 MiB.\n"
			"Exit status: 0 at the end of stdin; 128+N after signal N (SIGTERM,\n"
			"SIGINT, SIGHUP); %d when the options are refused. See\n"
			"sage-sandbox-mcp(7).\n",
			MCP_MAX_OUTPUT_KIB, EXIT_REFUSED);
		return;
	}
	if (command && strcmp(command->name, "self-test") == 0)
		fprintf(out, "\nExit status: 0 every check passed; 1 one failed; %d not run (bad\n"
			"usage, podman missing or not rootless, no image); 128+N after signal N.\n"
			"See sage-sandbox(1).\n", EXIT_REFUSED);
	else if (command && strcmp(command->name, "status") == 0)
		fprintf(out, "\nExit status: 0 ready; 1 not ready (the line says why, and the fix);\n"
			"%d bad usage. See sage-sandbox(1).\n", EXIT_REFUSED);
	else if (command && strcmp(command->name, "cleanup") == 0)
		fprintf(out, "\nExit status: 0, also when nothing was left; %d podman could not\n"
			"list or remove them. See sage-sandbox(1).\n", EXIT_REFUSED);
	else
		fprintf(out,
			"\nExit status: the code's own (0, 1, n of sys.exit(int(n)), 128+N for signal N);\n"
			"%d memory limit (the run's total); %d output limit; %d timeout; %d not\n"
			"run (bad usage, podman missing or not rootless, no image).\n"
			"See sage-sandbox(1).\n",
			EXIT_MEMORY_LIMIT, EXIT_OUTPUT_LIMIT, EXIT_TIMEOUT, EXIT_REFUSED);
}

/* ---- errors ------------------------------------------------------------- */

/* Says why nothing was run, before any loop exists: one line on stderr, and
 * the JSON object too when asked for. Returns the exit status. */
static int report_error(const struct error *err, bool json, const struct config *cfg)
{
	fprintf(stderr, "sage-sandbox: %s%s%s\n", err->message, err->hint[0] ? "; " : "",
		err->hint);
	if (json)
		write_error_object(stdout, err, cfg);
	fflush(stdout);
	return err->status;
}

/* ---- options ------------------------------------------------------------ */

static const char usage_hint[] = "see sage-sandbox --help";

/* Is the option part of arg (its first name_len bytes, before any "=")
 * exactly name? */
static bool is_option(const char *arg, size_t name_len, const char *name)
{
	return strlen(name) == name_len && strncmp(arg, name, name_len) == 0;
}

/* Options as podman and GNU tools take them: the last of a repeated option
 * wins (an alias or a Makefile variable can be overridden), --opt VALUE and
 * --opt=VALUE alike. An unknown option, a missing value or a value out of
 * range is an error that names the option. For run, the first argument
 * that is not an option (or follows --) is FILE, and the rest are the
 * code's, as with `podman run IMAGE ARG...` and `sage FILE ARG...`. Flags
 * are checked first, then only the environment variables they do not
 * override. Long: one branch per kind of option, in the order they are
 * tried. */
static int parse_options(int argc, char **argv, bool takes_file, bool server, bool batch,
		struct options *o, struct error *err)
{
	const char *flag_value[SETTING_COUNT] = {0};
	bool only_positional = false;
	/* Room for a long value: error_set cuts the message it makes, on a
	 * character, with "…" (attack helper 164: this cut first). */
	char why[2 * sizeof err->message];
	int i;

	/* Known before anything can fail, so that every error is JSON too. */
	for (i = 0; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (argv[i][0] != '-' || strcmp(argv[i], "-") == 0) {
			/* FILE, or the value of the option before it. */
			if (i == 0 || strncmp(argv[i - 1], "--", 2) != 0 || strchr(argv[i - 1], '=') ||
			    strcmp(argv[i - 1], "--json") == 0 ||
			    strcmp(argv[i - 1], "--show-control-chars") == 0 ||
			    strcmp(argv[i - 1], "--fresh") == 0 ||
			    strcmp(argv[i - 1], "--no-server") == 0 ||
			    strcmp(argv[i - 1], "--output-overwrite") == 0)
				break;
		}
		if (strncmp(argv[i], "--json", 6) == 0 && (argv[i][6] == '\0' || argv[i][6] == '='))
			o->json = true;
	}

	for (i = 0; i < argc; i++) {
		const char *arg = argv[i];
		if (only_positional || arg[0] != '-' || strcmp(arg, "-") == 0) {
			if (!takes_file) {
				error_set(err, EXIT_REFUSED, usage_hint, "unexpected argument '%s'", arg);
				return -1;
			}
			o->file = arg;
			o->args = argv + i + 1;
			o->argc = argc - i - 1;
			break;
		}
		if (strcmp(arg, "--") == 0) {
			only_positional = true;
			continue;
		}
		if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
			o->help = true;
			return 0;
		}
		size_t name_len = strcspn(arg, "=");
		bool has_value = arg[name_len] == '=';
		/* Batch's own options: not settings (no environment variable). */
		const char **batch_value = !batch ? NULL :
			is_option(arg, name_len, "--jobs") ? &o->jobs :
			is_option(arg, name_len, "--order") ? &o->order :
			is_option(arg, name_len, "--resume") ? &o->resume :
			is_option(arg, name_len, "--shard") ? &o->shard : NULL;
		if (batch_value) {
			const char *value = has_value ? arg + name_len + 1 : i + 1 < argc ? argv[++i] : NULL;
			if (!value || !*value) {
				error_set(err, EXIT_REFUSED, usage_hint, "option %.*s needs a value",
					(int)name_len, arg);
				return -1;
			}
			*batch_value = value;
			continue;
		}
		/* Run's own options: not settings (no environment variable). */
		bool is_output_dir = takes_file && !batch && is_option(arg, name_len, "--output-dir");
		bool is_input = takes_file && !batch && is_option(arg, name_len, "--input");
		if (is_output_dir || is_input) {
			const char *value = has_value ? arg + name_len + 1 : i + 1 < argc ? argv[++i] : NULL;
			if (!value || !*value) {
				error_set(err, EXIT_REFUSED, usage_hint, "option %.*s needs a %s",
					(int)name_len, arg, is_input ? "file or directory" : "directory");
				return -1;
			}
			if (is_output_dir) {
				o->output_dir = value;
			} else {
				/* Repeatable: each names more files. */
				o->inputs = realloc(o->inputs, (size_t)(o->input_count + 1) * sizeof *o->inputs);
				if (!o->inputs)
					abort();
				o->inputs[o->input_count++] = value;
			}
			continue;
		}
		bool *flag = is_option(arg, name_len, "--json") ? &o->json :
			is_option(arg, name_len, "--show-control-chars") ? &o->show_control_chars :
			takes_file && !batch && is_option(arg, name_len, "--output-overwrite") ?
			&o->output_overwrite :
			takes_file && is_option(arg, name_len, "--no-server") ? &o->no_server :
			batch && is_option(arg, name_len, "--fresh") ? &o->fresh : NULL;
		if (flag) {
			if (has_value) {
				error_set(err, EXIT_REFUSED, usage_hint, "option %.*s takes no value",
					(int)name_len, arg);
				return -1;
			}
			*flag = true;
			continue;
		}
		int id;
		for (id = 0; id < SETTING_COUNT; id++)
			if (is_option(arg, name_len, settings[id].flag))
				break;
		if (id == SETTING_COUNT) {
			error_set(err, EXIT_REFUSED, usage_hint, "unknown option '%.*s'",
				(int)name_len, arg);
			return -1;
		}
		if (settings[id].server && !server) {
			/* serve takes a --warm of its own (serve_options). */
			error_set(err, EXIT_REFUSED, usage_hint, "option %s is for sage-sandbox mcp%s only",
				settings[id].flag, id == SET_WARM ? " and serve" : "");
			return -1;
		}
		if (has_value) {
			flag_value[id] = arg + name_len + 1;
		} else if (i + 1 < argc) {
			flag_value[id] = argv[++i];
		} else {
			error_set(err, EXIT_REFUSED, usage_hint, "option %s needs a value: %s",
				settings[id].flag, settings[id].allowed);
			return -1;
		}
	}

	if (config_init(&o->cfg, flag_value, server, why, sizeof why) < 0) {
		error_set(err, EXIT_REFUSED, usage_hint, "%s", why);
		return -1;
	}
	return 0;
}

/* ---- run and self-test ----------------------------------------------------- */

/* When sage-sandbox started: --timeout counts from here. */
static int64_t started_at;

/* Ends a run that did not run: the line, and the object with --json. */
static int emit_refusal(struct oneshot *run, const struct error *err, bool json,
		const struct config *cfg)
{
	struct printed p = {.err = err, .cfg = cfg};
	oneshot_emit_printed(run, 1, print_error_line, &p);
	if (json)
		oneshot_emit_printed(run, 0, print_error_object, &p);
	return err->status;
}

/* A run through the server (client.c), when one takes it: its status, or
 * CLIENT_COLD. */
static int run_through_server(const struct options *o, const struct infiles *in,
		const struct outfiles *out, int code_fd, enum server_use use)
{
	struct client_run cr = {.cfg = &o->cfg, .file = o->file, .code_fd = code_fd,
		.args = (const char *const *)o->args, .argc = o->argc, .json = o->json,
		.show_control_chars = o->show_control_chars, .in = in->count ? in : NULL,
		.out = o->output_dir ? out : NULL, .started_at = started_at};
	return client_run(&cr, use);
}

static int cmd_run(int argc, char **argv)
{
	struct options o = {0};
	struct error err;
	enum server_use use = SERVER_OFF;

	if (parse_options(argc, argv, true, false, false, &o, &err) < 0)
		return report_error(&err, o.json, NULL);
	if (o.help) {
		print_usage(stdout, find_help("run"));
		return 0;
	}
	if (!o.no_server && server_use_from_environment(&use, &err) < 0)
		return report_error(&err, o.json, &o.cfg);
	/* The files in, the directory out and the code's FILE are opened and
	 * checked before anything runs: a refusal leaves nothing started. */
	struct infiles in = {0};
	struct outfiles out = {.dirfd = -1};
	int code_fd = -1, status = 0;
	for (int i = 0; i < o.input_count && status == 0; i++)
		if (infiles_add_path(&in, o.inputs[i], &err) < 0)
			status = -1;
	free(o.inputs);
	if (status == 0 && o.output_overwrite && !o.output_dir) {
		error_set(&err, EXIT_REFUSED, "add --output-dir DIR, or drop --output-overwrite",
			"--output-overwrite needs --output-dir");
		status = -1;
	}
	if (status == 0 && o.output_dir &&
	    outfiles_open(&out, o.output_dir, o.output_overwrite, &o.cfg, &err) < 0)
		status = -1;
	if (status == 0 && o.file && strcmp(o.file, "-") != 0 &&
	    open_code_file(o.file, &code_fd, &err) < 0)
		status = -1;
	if (status < 0) {
		status = report_error(&err, o.json, &o.cfg);
	} else if ((status = run_through_server(&o, &in, &out, code_fd, use)) == CLIENT_COLD) {
		struct oneshot run = {.cfg = &o.cfg, .started_at = started_at, .stream = !o.json,
			.show_control_chars = o.show_control_chars, .file = o.file, .code_fd = code_fd,
			.args = (const char *const *)o.args, .argc = o.argc,
			.in = in.count ? &in : NULL, .out = o.output_dir ? &out : NULL};
		if (oneshot_begin(&run) < 0) {
			status = report_error(&run.err, o.json, &o.cfg);
		} else {
			oneshot_run(&run);
			status = oneshot_report_run(&run, o.json);
		}
		oneshot_end(&run);
	}
	if (code_fd >= 0)
		close(code_fd);
	outfiles_close(&out);
	infiles_free(&in);
	return status;
}

static void self_test_code_for_host(struct oneshot *run, const struct podman_host *host)
{
	struct buffer *code = run->hook_data;
	self_test_code(run->cfg, host, code);
	run->code = code->data;
	run->code_len = code->len;
}

static int cmd_self_test(int argc, char **argv)
{
	struct options o = {0};
	struct error err;
	struct buffer code = {0};

	if (parse_options(argc, argv, false, false, false, &o, &err) < 0)
		return report_error(&err, o.json, NULL);
	if (o.help) {
		print_usage(stdout, find_help("self-test"));
		return 0;
	}
	struct oneshot run = {.cfg = &o.cfg, .started_at = started_at, .code_fd = -1,
		.show_control_chars = o.show_control_chars, .code_for_host = self_test_code_for_host,
		.hook_data = &code};
	int status;
	if (oneshot_begin(&run) < 0) {
		status = report_error(&run.err, o.json, &o.cfg);
	} else if (oneshot_run(&run) < 0) {
		status = emit_refusal(&run, &run.err, o.json, &o.cfg);
	} else {
		struct run_result *res = run.result;
		struct self_test t;
		struct printed p = {.result = res, .cfg = &o.cfg};
		self_test_parse(res->out.data ? res->out.data : "", res->exit_code, &t);
		status = res->interrupted_by ? res->exit_code : t.failed ? 1 : 0;
		struct printed_self_test printed = {&t, res, &o.cfg, o.json, status};
		oneshot_emit_printed(&run, 0, print_self_test, &printed);
		if (t.failed && !o.json) {
			oneshot_emit_printed(&run, 1, print_stop_line, &p);
			if (res->err.len) {
				static const char intro[] = "sage-sandbox: Sage's stderr:\n";
				oneshot_emit(&run, 1, intro, sizeof intro - 1);
				oneshot_emit_code_output(&run, 1, res->err.data, res->err.len, true);
			}
		}
	}
	oneshot_end(&run);
	buffer_free(&code);
	return status;
}

static int cmd_cleanup(int argc, char **argv)
{
	struct options o = {0};
	struct error err;
	struct buffer removed = {0};

	if (parse_options(argc, argv, false, false, false, &o, &err) < 0)
		return report_error(&err, o.json, NULL);
	if (o.help) {
		print_usage(stdout, find_help("cleanup"));
		return 0;
	}
	char *podman = podman_executable(o.cfg.value[SET_PODMAN], &err);
	if (!podman)
		return report_error(&err, o.json, &o.cfg);
	int count = sandbox_cleanup(podman, &removed, &err);
	free(podman);
	if (count < 0)
		return report_error(&err, o.json, &o.cfg);
	if (o.json) {
		struct json j = {.out = stdout};
		jw_begin_object(&j);
		write_json_header(&j, true, 0, NULL);
		jw_key(&j, "removed");
		jw_begin_array(&j);
		const char *cursor = removed.data, *line;
		size_t len;
		while ((line = next_line(&cursor, &len)))
			jw_string(&j, line, len);
		jw_end_array(&j);
		jw_end_object(&j);
	} else {
		printf("%sremoved %d container%s left by killed runs\n", removed.data ? removed.data : "",
			count, count == 1 ? "" : "s");
	}
	buffer_free(&removed);
	return 0;
}

static int cmd_status(int argc, char **argv)
{
	struct options o = {0};
	struct error err;
	struct status_report report;

	if (parse_options(argc, argv, false, false, false, &o, &err) < 0)
		return report_error(&err, o.json, NULL);
	if (o.help) {
		print_usage(stdout, find_help("status"));
		return 0;
	}
	status_gather(&o.cfg, &report);
	if (o.json)
		status_print_json(stdout, &report);
	else
		status_print_text(stdout, &report);
	bool ready = status_ready(&report);
	status_free(&report);
	return ready ? 0 : 1;
}

static int cmd_mcp(int argc, char **argv)
{
	struct options o = {0};
	struct error err;

	if (parse_options(argc, argv, false, true, false, &o, &err) < 0)
		return report_error(&err, false, NULL);
	if (o.help) {
		print_usage(stdout, find_help("mcp"));
		return 0;
	}
	if (o.json || o.show_control_chars) {
		error_set(&err, EXIT_REFUSED, usage_hint, "option %s is not for mcp: it speaks "
			"JSON-RPC on stdout", o.json ? "--json" : "--show-control-chars");
		return report_error(&err, false, NULL);
	}
	if (o.cfg.number[SET_OUTPUT_LIMIT] > MCP_MAX_OUTPUT_KIB) {
		error_set(&err, EXIT_REFUSED, "give mcp --output-limit 384 or less",
			"--output-limit %ld is above mcp's largest, %d: an answer could pass the "
			"10 MiB message size of MCP clients", o.cfg.number[SET_OUTPUT_LIMIT],
			MCP_MAX_OUTPUT_KIB);
		return report_error(&err, false, NULL);
	}
	/* A model writes what notebooks taught it: a bare last line is
	 * shown, unless the server is told otherwise (and a call's JSON
	 * names what it got). */
	char why[128];
	if (o.cfg.source[SET_DISPLAY] == FROM_DEFAULT)
		setting_set(&o.cfg, SET_DISPLAY, "last", FROM_DEFAULT, why, sizeof why);
	return mcp_serve(&o.cfg);
}

static int cmd_batch(int argc, char **argv)
{
	struct options o = {0};
	struct error err;
	struct batch_options b = {.cfg = &o.cfg};

	if (parse_options(argc, argv, true, false, true, &o, &err) < 0)
		return report_error(&err, false, NULL);
	if (o.help) {
		print_usage(stdout, find_help("batch"));
		return 0;
	}
	if (o.json || o.show_control_chars) {
		error_set(&err, EXIT_REFUSED, "drop it: batch always writes one JSON object a line",
			"option %s is not for batch", o.json ? "--json" : "--show-control-chars");
		return report_error(&err, false, NULL);
	}
	if (o.jobs) {
		char *end;
		b.jobs = strtol(o.jobs, &end, 10);
		if (*end || b.jobs < 1 || b.jobs > BATCH_MAX_JOBS) {
			error_set(&err, EXIT_REFUSED, usage_hint, "--jobs '%s' is not a count from 1 to %d",
				o.jobs, BATCH_MAX_JOBS);
			return report_error(&err, false, NULL);
		}
	}
	if (o.order && strcmp(o.order, "input") != 0 && strcmp(o.order, "completion") != 0) {
		error_set(&err, EXIT_REFUSED, usage_hint, "--order '%s' is not input or completion",
			o.order);
		return report_error(&err, false, NULL);
	}
	if (o.shard && parse_shard(o.shard, &b.shard_index, &b.shard_count, &err) < 0)
		return report_error(&err, false, NULL);
	/* FILE is the first input; the rest follow it. */
	char **files = NULL;
	if (o.file) {
		files = o.args - 1;
		b.file_count = o.argc + 1;
	}
	b.files = files;
	b.fresh = o.fresh;
	b.input_order = o.order && strcmp(o.order, "input") == 0;
	b.resume = o.resume;
	b.progress = isatty(2);
	enum server_use use = SERVER_OFF;
	if (!o.no_server && server_use_from_environment(&use, &err) < 0)
		return report_error(&err, false, NULL);
	/* The inputs are opened once, here: the server reads them through
	 * these descriptors, or the batch on its own does. */
	int fds[BATCH_FDS_MAX];
	size_t nfds = 0;
	if (batch_open_inputs(&b, fds, &nfds) == 0)
		b.fds = fds;
	int status = CLIENT_COLD;
	if (!b.fresh) {
		struct client_batch cb = {.cfg = &o.cfg, .files = b.files, .file_count = b.file_count,
			.fds = b.fds, .nfds = nfds,
			.jobs = b.jobs ? b.jobs : batch_default_jobs(&o.cfg, NULL, 0),
			.shard_index = b.shard_index, .shard_count = b.shard_count,
			.input_order = b.input_order, .progress = b.progress, .resume = b.resume,
			.started_at = started_at};
		status = client_batch(&cb, use);
	}
	if (status == CLIENT_COLD)
		status = batch_run(&b);
	batch_close_inputs(fds, nfds);
	return status;
}

/* serve's own options, taken out of argv before the settings are parsed;
 * -1 with err set. */
static int serve_options(int *argc, char **argv, long *idle, long *warm, bool *stop,
		struct error *err)
{
	int kept = 0;
	for (int i = 0; i < *argc; i++) {
		const char *arg = argv[i];
		size_t name_len = strcspn(arg, "=");
		bool is_idle = is_option(arg, name_len, "--idle");
		if (strcmp(arg, "--stop") == 0) {
			*stop = true;
			continue;
		}
		if (!is_idle && !is_option(arg, name_len, "--warm")) {
			argv[kept++] = argv[i];
			continue;
		}
		const char *value = arg[name_len] == '=' ? arg + name_len + 1 :
			i + 1 < *argc ? argv[++i] : NULL;
		long max = is_idle ? SERVER_IDLE_MAX_SECONDS : POOL_MAX_SIZE;
		char *end;
		errno = 0;
		long v = value ? strtol(value, &end, 10) : -1;
		if (!value || !*value || *end || errno || v < 0 || v > max) {
			error_set(err, EXIT_REFUSED, usage_hint, "option %.*s needs a whole number "
				"from 0 to %ld", (int)name_len, arg, max);
			return -1;
		}
		*(is_idle ? idle : warm) = v;
	}
	*argc = kept;
	return 0;
}

static int cmd_serve(int argc, char **argv)
{
	struct options o = {0};
	struct error err;
	long idle = SERVER_IDLE_SECONDS, warm = -1;
	bool stop = false;

	if (serve_options(&argc, argv, &idle, &warm, &stop, &err) < 0 ||
	    parse_options(argc, argv, false, false, false, &o, &err) < 0)
		return report_error(&err, false, NULL);
	if (o.help) {
		print_usage(stdout, find_help("serve"));
		return 0;
	}
	if (o.json || o.show_control_chars) {
		error_set(&err, EXIT_REFUSED, usage_hint, "option %s is not for serve",
			o.json ? "--json" : "--show-control-chars");
		return report_error(&err, false, NULL);
	}
	if (stop) {
		int status = client_stop_server(&err);
		if (status == EXIT_REFUSED)
			return report_error(&err, false, NULL);
		if (status == 1)
			fprintf(stderr, "sage-sandbox: no server answers\n");
		return status;
	}
	char why[160];
	struct server_options so = {.cfg = &o.cfg, .idle_seconds = idle, .started_at = started_at,
		.warm = (int)(warm >= 0 ? warm : batch_default_jobs(&o.cfg, why, sizeof why))};
	if (so.warm > POOL_MAX_SIZE)
		so.warm = POOL_MAX_SIZE;
	return server_run(&so);
}

static const struct command {
	const char *name;
	int (*run)(int argc, char **argv);
} commands[] = {
	{"run", cmd_run},
	{"self-test", cmd_self_test},
	{"status", cmd_status},
	{"cleanup", cmd_cleanup},
	{"mcp", cmd_mcp},
	{"batch", cmd_batch},
	{"serve", cmd_serve},
};

int main(int argc, char **argv)
{
	started_at = loop_now_ms();
	/* A caller that ignores SIGCHLD (inherited across exec) would have the
	 * kernel reap our children before we can learn how they ended. */
	signal(SIGCHLD, SIG_DFL);
	/* A closed pipe is an error from write(), not a death. */
	signal(SIGPIPE, SIG_IGN);
	/* A fixed threshold, not glibc's sliding one: once a run's 512 KiB
	 * output queue was freed, glibc took later ones from the heap, which
	 * then grew in a long-lived server (+3.2 MiB of RSS over 10,000 runs
	 * through serve; flat with this). Mapped, each goes back when freed. */
	mallopt(M_MMAP_THRESHOLD, 128 * 1024);
	/* Descriptors up to the hard limit: every watch holds one more (the
	 * loop's own, loop.c), a server's client run up to REQUEST_MAX_FDS,
	 * and mcp and batch many sandboxes' pipes. Nothing here relies on
	 * select(). */
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	/* With 0, 1 or 2 closed, the pipes and files opened later could take
	 * their numbers and be mistaken for them in the child. */
	for (int fd = 0; fd < 3; fd++)
		if (fcntl(fd, F_GETFD) < 0 && open("/dev/null", O_RDWR) != fd)
			return EXIT_REFUSED;
	if (argc < 2) {
		fprintf(stderr, "sage-sandbox: missing command; use run, batch, self-test, status, "
				"serve, cleanup, mcp or help (see sage-sandbox help)\n");
		return EXIT_REFUSED;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		print_usage(stdout, NULL);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0) {
		printf("sage-sandbox %s\n", SAGE_SANDBOX_VERSION);
		return 0;
	}
	if (strcmp(argv[1], "help") == 0) {
		const struct command_help *c = argc > 2 ? find_help(argv[2]) : NULL;
		if (argc > 3 || (argc > 2 && !c)) {
			fprintf(stderr, "sage-sandbox: help takes one command name: run, batch, "
					"self-test, status, serve, cleanup or mcp\n");
			return EXIT_REFUSED;
		}
		print_usage(stdout, c);
		return fflush(stdout) == 0 ? 0 : EXIT_REFUSED;
	}
	for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++) {
		if (strcmp(argv[1], commands[i].name) != 0)
			continue;
		int status = commands[i].run(argc - 2, argv + 2);
		if (fflush(stdout) != 0 && status == 0)
			status = EXIT_REFUSED;
		return status;
	}
	struct error err;
	error_set(&err, EXIT_REFUSED, "use run, batch, self-test, status, serve, cleanup or mcp "
		"(see sage-sandbox help)", "unknown command '%s'", argv[1]);
	return report_error(&err, false, NULL);
}
