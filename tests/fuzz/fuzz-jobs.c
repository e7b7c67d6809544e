/* fuzz-jobs.c: libFuzzer target for batch's job lines (JSON Lines read with
 * jansson, checked line by line): the input as a file of jobs, read through
 * to its end; every job, bad or not, freed. */
#include "jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static struct config cfg;
	static bool ready;
	if (!ready) {
		char why[256];
		if (config_init(&cfg, (const char *[SETTING_COUNT]){0}, false, why, sizeof why) < 0)
			abort();
		ready = true;
	}
	int fd = memfd_create("jobs", MFD_CLOEXEC);
	if (fd < 0 || write(fd, data, size) != (ssize_t)size)
		abort();
	char name[64];
	snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
	char *files[] = {name};
	struct error err;
	struct job_source *s = job_source_open(files, 1, &cfg, 0, 0, false, NULL, &err);
	if (!s)
		abort();
	struct job *j;
	int got;
	while ((got = job_source_next(s, &j)) > 0) {
		if (!j->bad && (j->code_len > 50000 || j->argc < 1))
			abort();
		job_free(j);
	}
	job_source_close(s);
	close(fd);
	return 0;
}
