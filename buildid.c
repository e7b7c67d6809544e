/* buildid.c: this build's identity, from its own ELF build-id note (the
 * Makefile links with --build-id). */
#include "buildid.h"

#include <elf.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char id_text[2 * 64 + 1];

static int find_note(struct dl_phdr_info *info, size_t size, void *data)
{
	if (info->dlpi_name && info->dlpi_name[0])
		return 0; /* a shared library, not the executable */
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const char *p = (const char *)(info->dlpi_addr + ph->p_vaddr);
		const char *end = p + ph->p_memsz;
		while ((size_t)(end - p) >= sizeof(ElfW(Nhdr))) {
			const ElfW(Nhdr) *note = (const void *)p;
			const char *name = p + sizeof *note;
			const unsigned char *desc = (const unsigned char *)name +
				((note->n_namesz + 3) & ~3u);
			const char *next = (const char *)desc + ((note->n_descsz + 3) & ~3u);
			if (next > end)
				break;
			if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
			    memcmp(name, "GNU", 4) == 0 && note->n_descsz <= 64) {
				for (unsigned k = 0; k < note->n_descsz; k++)
					snprintf(id_text + 2 * k, 3, "%02x", desc[k]);
				return 1;
			}
			p = next;
		}
	}
	return 0;
}

const char *build_id(void)
{
	if (!id_text[0] && !dl_iterate_phdr(find_note, NULL))
		snprintf(id_text, sizeof id_text, "unknown");
	return id_text;
}
