/* fuzz-settings.c: libFuzzer target for the settings file: parsed as
 * settings.c parses it, and every value it names checked as a setting. */
#include "settings.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	char *text = malloc(size + 1);
	const char *values[SETTING_COUNT];
	int line[SETTING_COUNT];
	char why[512];
	if (!text)
		abort();
	memcpy(text, data, size);
	text[size] = '\0';
	if (settings_file_parse(text, size, "fuzz", values, line, why, sizeof why) == 0) {
		struct config cfg = {0};
		for (int id = 0; id < SETTING_COUNT; id++) {
			if (!values[id])
				continue;
			if (line[id] < 1 || strlen(values[id]) > size)
				abort();
			setting_set(&cfg, id, values[id], FROM_FILE, why, sizeof why);
		}
	} else if (!strstr(why, "settings file fuzz, line ")) {
		abort(); /* every refusal names its line */
	}
	free(text);
	return 0;
}
