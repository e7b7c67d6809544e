/* settings.c: the settings table, parsing and checking each value, and the
 * rlimits derived from the settings. */
#include "settings.h"
#include "names.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- the settings table ---------------------------------------------- */

static const char *const display_choices[] = {"none", "last", NULL};

const struct setting settings[SETTING_COUNT] = {
	[SET_IMAGE] = {"--image", "SAGE_SANDBOX_IMAGE", "IMAGE", "image", KIND_IMAGE, 0, 0, NULL,
		"an image reference, not starting with '-', printable, no white space",
		/* setup.sh's passagemath_version: tests/unit-cli.sh holds them equal */
		"localhost/sagemath-passagemath:10.8.13",
		"container image with Sage (see IMAGES in sage-sandbox(1))"},
	[SET_PYTHON] = {"--python", "SAGE_SANDBOX_PYTHON", "PATH", "python", KIND_INTERPRETER, 0, 0,
		NULL, "auto, or an absolute path inside the image, printable, no white space", "auto",
		"Sage's Python in the image; auto: the one `sage -python` runs"},
	[SET_PODMAN] = {"--podman", "SAGE_SANDBOX_PODMAN", "PATH", "podman", KIND_PATH, 0, 0, NULL,
		"an executable name or path, printable, no white space", "podman", "podman executable"},
	[SET_TIMEOUT] = {"--timeout", "SAGE_SANDBOX_TIMEOUT", "SECONDS", "timeout_seconds",
		KIND_INTEGER, 1, 600, NULL, "an integer from 1 to 600", "60",
		"wall-clock limit for the whole run, container start included"},
	[SET_MEMORY] = {"--memory", "SAGE_SANDBOX_MEMORY", "SIZE", "memory", KIND_SIZE,
		256l << 20, 8l << 30, NULL,
		"a size from 256m to 8g: a number, a fraction allowed, with b, k, m or g (any case)",
		"1g", "memory limit"},
	[SET_CPUS] = {"--cpus", "SAGE_SANDBOX_CPUS", "N", "cpus", KIND_MILLI, 100, 4000, NULL,
		"a number from 0.1 to 4, at most 3 decimals", "1", "CPU share"},
	[SET_PIDS_LIMIT] = {"--pids-limit", "SAGE_SANDBOX_PIDS_LIMIT", "N", "pids_limit",
		KIND_INTEGER, 16, 512, NULL, "an integer from 16 to 512", "96",
		"processes and threads"},
	[SET_OUTPUT_LIMIT] = {"--output-limit", "SAGE_SANDBOX_OUTPUT_LIMIT", "KIB",
		"output_limit_kib", KIND_INTEGER, 16, 2048, NULL, "an integer from 16 to 2048", "256",
		"KiB of stdout and of stderr each, past which the run is stopped"},
	[SET_SECCOMP_PROFILE] = {"--seccomp-profile", "SAGE_SANDBOX_SECCOMP_PROFILE", "PATH",
		"seccomp_profile", KIND_PROFILE, 0, 0, NULL,
		"builtin, or a seccomp profile file in podman's JSON format, its path printable, no "
		"white space", "builtin",
		"seccomp profile"},
	[SET_OUTPUT_FILES] = {"--output-files", "SAGE_SANDBOX_OUTPUT_FILES", "N", "output_files",
		KIND_INTEGER, 1, 1000, NULL, "an integer from 1 to 1000", "100",
		"files brought back from $SAGE_SANDBOX_OUT, at most (run --output-dir, mcp)"},
	[SET_OUTPUT_FILE_SIZE] = {"--output-file-size", "SAGE_SANDBOX_OUTPUT_FILE_SIZE", "SIZE",
		"output_file_size", KIND_SIZE, 1l << 10, 128l << 20, NULL,
		"a size from 1k to 128m: a number, a fraction allowed, with b, k, m or g (any case)",
		"64m", "the largest file brought back"},
	[SET_OUTPUT_SIZE] = {"--output-size", "SAGE_SANDBOX_OUTPUT_SIZE", "SIZE", "output_size",
		KIND_SIZE, 1l << 10, 256l << 20, NULL,
		"a size from 1k to 256m: a number, a fraction allowed, with b, k, m or g (any case)",
		"64m", "all files brought back together, at most"},
	[SET_DISPLAY] = {"--display", "SAGE_SANDBOX_DISPLAY", "WHAT", "display", KIND_CHOICE, 0, 0,
		display_choices, "last or none", "none",
		"what is displayed besides what the code prints: last, the value of a bare last "
		"expression, as a notebook cell shows it (mcp's default); none, as sage FILE (run's "
		"and batch's default). show() of graphics gives images either way"},
	[SET_SEED] = {"--seed", "SAGE_SANDBOX_SEED", "N", "seed", KIND_SEED, 0, SEED_MAX, NULL,
		"none, or an integer from 0 to 4294967295", "none",
		"the code's random state from N: Sage's (and GMP's, PARI's and GAP's, as Sage uses "
		"them), Python's, numpy's, sympy's, Singular's and the gap, maxima, singular and gp "
		"programs'; the same "
		"code and N print the same, cold or warm (none: fresh each run)"},
	[SET_WARM] = {"--warm", "SAGE_SANDBOX_WARM", "N", "warm", KIND_INTEGER, 0, 8, NULL,
		"an integer from 0 to 8", "1",
		"sandboxes kept started, with Sage imported, for the next calls (0: none)",
		.server = true},
	[SET_CONCURRENCY] = {"--concurrency", "SAGE_SANDBOX_CONCURRENCY", "N", "concurrency",
		KIND_INTEGER, 1, 16, NULL, "an integer from 1 to 16", "2",
		"tool calls served at once; more wait in the order they came", .server = true},
	[SET_SESSIONS] = {"--sessions", "SAGE_SANDBOX_SESSIONS", "N", "sessions", KIND_INTEGER,
		0, 16, NULL, "an integer from 0 to 16", "4",
		"sessions (calls that share one Sage) open at once; 0: none", .server = true},
	[SET_SESSION_IDLE] = {"--session-idle", "SAGE_SANDBOX_SESSION_IDLE", "SECONDS",
		"session_idle", KIND_INTEGER, 10, 86400, NULL, "an integer from 10 to 86400", "900",
		"a session without a call for this long ends", .server = true},
};

const char *setting_source_name(enum setting_source source)
{
	switch (source) {
	case FROM_FLAG: return "flag";
	case FROM_ENVIRONMENT: return "environment";
	case FROM_FILE: return "settings file";
	default: return "default";
	}
}

static bool parse_integer(const char *text, long *out)
{
	long value = 0;
	if (*text == '\0')
		return false;
	for (const char *p = text; *p; p++) {
		if (*p < '0' || *p > '9' || value > 100000000)
			return false;
		value = value * 10 + (*p - '0');
	}
	*out = value;
	return true;
}

/* Up to ten digits: a --seed. */
static bool parse_seed(const char *text, long *out)
{
	size_t len = strlen(text);
	if (len == 0 || len > 10 || strspn(text, "0123456789") != len)
		return false;
	*out = strtol(text, NULL, 10);
	return true;
}

/* A decimal of `len` characters ("1", "1.5", ".5", "2."): its whole part,
 * and its fraction as digits over 10^places (at most 6 places). No floating
 * point, no locale, no "1e3" or "inf". */
struct decimal {
	long units, fraction, places;
};

static bool parse_decimal(const char *text, size_t len, struct decimal *d)
{
	size_t i = 0, digits = 0;
	*d = (struct decimal){0};
	for (; i < len && text[i] >= '0' && text[i] <= '9'; i++, digits++) {
		if (d->units > 1000000000000l)
			return false;
		d->units = d->units * 10 + (text[i] - '0');
	}
	if (i < len && text[i] == '.') {
		for (i++; i < len && text[i] >= '0' && text[i] <= '9'; i++, digits++) {
			if (++d->places > 6)
				return false;
			d->fraction = d->fraction * 10 + (text[i] - '0');
		}
	}
	return digits > 0 && i == len;
}

/* "0.25" -> 250: thousandths, at most 3 places. */
static bool parse_milli(const char *text, long *out)
{
	struct decimal d;
	if (!parse_decimal(text, strlen(text), &d) || d.places > 3)
		return false;
	for (long p = d.places; p < 3; p++)
		d.fraction *= 10;
	*out = d.units * 1000 + d.fraction;
	return true;
}

/* Sizes as podman takes them: "1g", "1G", "1.5g", "1536m", "768MiB",
 * "1gb", "268435456" (bytes); b, k, m, g in any case, then optionally "b"
 * or "ib". A fraction of a byte is dropped, as podman drops it. */
static bool parse_size(const char *text, long *out)
{
	size_t len = strlen(text);
	int shift = 0;
	bool binary = false;
	if (len && (text[len - 1] == 'b' || text[len - 1] == 'B'))
		len--;
	if (len && (text[len - 1] == 'i' || text[len - 1] == 'I')) {
		binary = true;
		len--;
	}
	if (len) {
		switch (text[len - 1]) {
		case 'k': case 'K': shift = 10; break;
		case 'm': case 'M': shift = 20; break;
		case 'g': case 'G': shift = 30; break;
		}
		if (shift)
			len--;
	}
	struct decimal d;
	if ((binary && !shift) || !parse_decimal(text, len, &d) || d.units > ((64l << 30) >> shift))
		return false;
	long scale = 1;
	for (long p = 0; p < d.places; p++)
		scale *= 10;
	*out = (d.units << shift) + (d.fraction << shift) / scale;
	return true;
}

void size_text(long bytes, char *buf, size_t size)
{
	if (bytes % (1l << 30) == 0)
		snprintf(buf, size, "%ldg", bytes >> 30);
	else if (bytes % (1l << 20) == 0)
		snprintf(buf, size, "%ldm", bytes >> 20);
	else if (bytes % (1l << 10) == 0)
		snprintf(buf, size, "%ldk", bytes >> 10);
	else
		snprintf(buf, size, "%ldb", bytes);
}

int setting_set(struct config *cfg, enum setting_id id, const char *text,
		enum setting_source source, char *why, size_t why_size)
{
	const struct setting *s = &settings[id];
	long number = 0;
	bool valid = false;

	switch (s->kind) {
	case KIND_IMAGE:
		valid = *text != '\0' && *text != '-' && reads_as_one_word(text);
		break;
	case KIND_PATH:
	case KIND_PROFILE:
		valid = *text != '\0' && reads_as_one_word(text);
		break;
	case KIND_INTERPRETER:
		valid = strcmp(text, "auto") == 0 || (*text == '/' && reads_as_one_word(text));
		break;
	case KIND_INTEGER:
		valid = parse_integer(text, &number) && number >= s->min && number <= s->max;
		break;
	case KIND_SEED:
		number = -1;
		valid = strcmp(text, "none") == 0 || (parse_seed(text, &number) && number <= s->max);
		break;
	case KIND_MILLI:
		valid = parse_milli(text, &number) && number >= s->min && number <= s->max;
		break;
	case KIND_SIZE:
		valid = parse_size(text, &number) && number >= s->min && number <= s->max;
		break;
	case KIND_CHOICE:
		for (const char *const *c = s->choices; *c; c++)
			if (strcmp(text, *c) == 0)
				valid = true;
		break;
	}
	if (!valid) {
		const char *origin = source == FROM_ENVIRONMENT ? s->env : s->flag;
		snprintf(why, why_size, "invalid %s '%s': allowed is %s", source == FROM_FILE ?
			s->flag + 2 : origin, text, s->allowed);
		return -1;
	}
	cfg->value[id] = text;
	cfg->source[id] = source;
	cfg->number[id] = number;
	return 0;
}

static bool blank(char c)
{
	return c == ' ' || c == '\t' || c == '\r';
}

/* Long: one pass over the lines, each refusal naming its line. */
int settings_file_parse(char *text, size_t len, const char *name,
		const char *values[SETTING_COUNT], int line[SETTING_COUNT], char *why,
		size_t why_size)
{
	int number = 0;
	for (int id = 0; id < SETTING_COUNT; id++) {
		values[id] = NULL;
		line[id] = 0;
	}
	for (char *at = text, *end = text + len; at < end;) {
		char *nl = memchr(at, '\n', (size_t)(end - at));
		char *stop = nl ? nl : end;
		number++;
		if (memchr(at, '\0', (size_t)(stop - at))) {
			snprintf(why, why_size, "settings file %s, line %d: a NUL byte", name, number);
			return -1;
		}
		*stop = '\0'; /* the line, and a value's end */
		char *p = at;
		at = stop + 1;
		while (blank(*p))
			p++;
		if (*p == '\0' || *p == '#')
			continue;
		char *key = p;
		while (*p && *p != '=' && !blank(*p))
			p++;
		size_t key_len = (size_t)(p - key);
		while (blank(*p))
			p++;
		if (*p != '=' || key_len == 0) {
			snprintf(why, why_size, "settings file %s, line %d: not NAME = VALUE", name,
				number);
			return -1;
		}
		p++;
		while (blank(*p))
			p++;
		char *value = p, *value_end = p + strlen(p);
		while (value_end > value && blank(value_end[-1]))
			value_end--;
		*value_end = '\0';
		int id;
		for (id = 0; id < SETTING_COUNT; id++)
			if (strlen(settings[id].flag + 2) == key_len &&
			    strncmp(settings[id].flag + 2, key, key_len) == 0)
				break;
		if (id == SETTING_COUNT) {
			/* Shown escaped (a name of other bytes came out raw:
			 * attack helper 157), and short enough that the rest of
			 * the message fits (attack helper 162). */
			char *shown = printable_name(key, key_len, 64);
			snprintf(why, why_size, "settings file %s, line %d: unknown setting '%s'; the "
				"names are the options of sage-sandbox --help without their dashes", name,
				number, shown);
			free(shown);
			return -1;
		}
		if (values[id]) {
			snprintf(why, why_size, "settings file %s, line %d: %s is already set on line %d",
				name, number, settings[id].flag + 2, line[id]);
			return -1;
		}
		values[id] = value;
		line[id] = number;
	}
	return 0;
}

const char *settings_file_path(bool *named)
{
	static char path[4096];
	const char *explicit = getenv("SAGE_SANDBOX_SETTINGS");
	*named = explicit && *explicit;
	if (*named)
		return explicit;
	const char *config = getenv("XDG_CONFIG_HOME"), *home = getenv("HOME");
	if (config && *config == '/')
		snprintf(path, sizeof path, "%s/sage-sandbox/settings", config);
	else if (home && *home == '/')
		snprintf(path, sizeof path, "%s/.config/sage-sandbox/settings", home);
	else
		return NULL;
	return path;
}

/* The settings file's values, read once: they live as long as the process
 * (a config points into them). */
static int file_values(const char *values[SETTING_COUNT], int line[SETTING_COUNT],
		const char **name, char *why, size_t why_size)
{
	static char *text;
	static const char *read_values[SETTING_COUNT];
	static int read_line[SETTING_COUNT];
	static const char *read_name;
	static bool read;
	bool named;
	if (!read) {
		read_name = settings_file_path(&named);
		/* Opened without blocking: the open of a FIFO no one writes
		 * waited for a writer, and sage-sandbox hung, silent (attack
		 * helper 164). Read blocking: a FIFO with a writer (the shell's
		 * <(...)) is read to its end; one without has none. */
		int fd = read_name ? open(read_name, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK) : -1;
		int flags = fd >= 0 ? fcntl(fd, F_GETFL) : -1;
		FILE *f = flags >= 0 && fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) == 0 ?
			fdopen(fd, "r") : NULL;
		int open_errno = errno;
		if (!f && fd >= 0)
			close(fd);
		if (!f && named) {
			snprintf(why, why_size, "cannot read the settings file %s (SAGE_SANDBOX_SETTINGS): "
				"%s", read_name, strerror(open_errno));
			return -1;
		}
		size_t len = 0;
		if (f) {
			text = malloc(SETTINGS_FILE_MAX + 1);
			if (!text)
				abort();
			len = fread(text, 1, SETTINGS_FILE_MAX + 1, f);
			bool failed = ferror(f);
			fclose(f);
			if (failed || len > SETTINGS_FILE_MAX) {
				snprintf(why, why_size, "cannot read the settings file %s: %s", read_name,
					failed ? strerror(errno) : "longer than 64 KiB");
				return -1;
			}
			if (settings_file_parse(text, len, read_name, read_values, read_line, why,
					why_size) < 0)
				return -1;
		}
		read = true;
	}
	for (int id = 0; id < SETTING_COUNT; id++) {
		values[id] = read_values[id];
		line[id] = read_line[id];
	}
	*name = read_name;
	return 0;
}

int config_init(struct config *cfg, const char *const flag_value[SETTING_COUNT], bool server,
		char *why, size_t why_size)
{
	const char *file[SETTING_COUNT], *file_name;
	int line[SETTING_COUNT];
	*cfg = (struct config){0};
	if (file_values(file, line, &file_name, why, why_size) < 0)
		return -1;
	for (int id = 0; id < SETTING_COUNT; id++) {
		const char *env = getenv(settings[id].env);
		int rc;
		if (flag_value[id]) {
			rc = setting_set(cfg, id, flag_value[id], FROM_FLAG, why, why_size);
		} else if (settings[id].server && !server) {
			rc = setting_set(cfg, id, settings[id].fallback, FROM_DEFAULT, why, why_size);
		} else if (env && *env) {
			rc = setting_set(cfg, id, env, FROM_ENVIRONMENT, why, why_size);
		} else if (file[id]) {
			rc = setting_set(cfg, id, file[id], FROM_FILE, why, why_size);
			if (rc < 0) {
				size_t used = strlen(why);
				snprintf(why + used, why_size - used, " (settings file %s, line %d)",
					file_name, line[id]);
			}
		} else {
			rc = setting_set(cfg, id, settings[id].fallback, FROM_DEFAULT, why, why_size);
		}
		if (rc < 0)
			return -1;
	}
	return 0;
}

const char *setting_text(const struct config *cfg, int id, char *buf, size_t size)
{
	if (settings[id].kind != KIND_SIZE)
		return cfg->value[id];
	size_text(cfg->number[id], buf, size);
	return buf;
}

uint64_t config_memory_bytes(const struct config *cfg)
{
	return (uint64_t)cfg->number[SET_MEMORY];
}

uint64_t warm_up_room(const struct config *cfg)
{
	uint64_t memory = config_memory_bytes(cfg);
	return memory >= WARM_UP_MEMORY_MIN ? memory + WARM_UP_DATA_EXTRA : 0;
}

void sandbox_rlimits(const struct config *cfg, struct rlimit_value out[RLIMIT_COUNT])
{
	/* CPU seconds one process may use: what --cpus allows over the whole
	 * timeout and a quarter more (RLIMIT_CPU_PERCENT), so that the rlimit
	 * bounds a spinning process where no cgroup does, and never ends one
	 * that a cpu group holds to its share before the timeout does: under
	 * the scheduler's throttling, the kernel's count for the rlimit runs
	 * ahead of the process's own CPU time (SIGXCPU at 0.865 s of a 1 s
	 * limit at --cpus 0.2, where a process without a quota got it at
	 * 0.999 s). Where the watchdog's throttle holds --cpus instead, this
	 * backstop is that much looser. At least 1: 0 would mean no limit. */
	uint64_t cpu = ((uint64_t)cfg->number[SET_TIMEOUT] * cfg->number[SET_CPUS] *
		RLIMIT_CPU_PERCENT + 99999) / 100000;
	out[RL_DATA] = (struct rlimit_value){.name = "data", .value = config_memory_bytes(cfg)};
	out[RL_CPU] = (struct rlimit_value){.name = "cpu", .value = cpu ? cpu : 1};
	out[RL_NPROC] = (struct rlimit_value){.name = "nproc",
		.value = (uint64_t)cfg->number[SET_PIDS_LIMIT]};
	/* Enough for Sage and its pexpect children; not enough to exhaust the
	 * kernel's file table. */
	out[RL_NOFILE] = (struct rlimit_value){.name = "nofile", .value = 1024};
	/* No single file beyond 128 MiB, whatever the tmpfs has left. */
	out[RL_FSIZE] = (struct rlimit_value){.name = "fsize", .value = 128ull << 20};
	/* No core dumps: a crashing 1 GiB process would fill /tmp. */
	out[RL_CORE] = (struct rlimit_value){.name = "core", .value = 0};
	/* No bytes for POSIX message queues: kernel memory outside any limit
	 * above, and nothing Sage uses. */
	out[RL_MSGQUEUE] = (struct rlimit_value){.name = "msgqueue", .value = 0};
	/* The stack is not data: without a hard limit, code raised its soft
	 * limit and grew a 3 GiB stack under --memory 256m. The usual 8 MiB. */
	out[RL_STACK] = (struct rlimit_value){.name = "stack", .value = 8ull << 20};
	/* Queued signals and POSIX timers, per uid (so per run): each is kernel
	 * memory that nothing else counts. At the host's default (96,365 here)
	 * one process's timers took 40 MiB of slab; Sage needs a handful. */
	out[RL_SIGPENDING] = (struct rlimit_value){.name = "sigpending", .value = 1024};
	/* Shared anonymous mappings and mapped memfds are not data either (a
	 * 4 GiB shared mapping was filled under --memory 256m); the address
	 * space counts every mapping. Podman has no name for it: the launcher
	 * sets it on the code's process. */
	out[RL_AS] = (struct rlimit_value){.name = "as",
		.value = config_memory_bytes(cfg) + ADDRESS_SPACE_HEADROOM, .by_launcher = true};
}
