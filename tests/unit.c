/* unit.c: tests of the pure helpers (JSON writing, setting parsing, code
 * checks, what podman prints) and of small mechanisms on the real kernel
 * (cpu groups on plain directories, uid claims' sockets), as TAP. The loop and the process module are
 * in unit-loop.c; everything else is tested against the real sandbox by the
 * bats suite. */
#include "base64.h"
#include "cpugroup.h"
#include "jobs.h"
#include "json.h"
#include "mcp.h"
#include "names.h"
#include "outfiles.h"
#include "podman.h"
#include "result.h"
#include "sandbox.h"
#include "sniff.h"
#include "rootless.h"
#include "selftest.h"
#include "terminal.h"
#include "uidclaim.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int test_number, failures;

static void check(bool ok, const char *what)
{
	printf("%s %d - %s\n", ok ? "ok" : "not ok", ++test_number, what);
	if (!ok)
		failures++;
}

/* The JSON text json_string writes for len bytes of s. */
static char *string_json(const char *s, size_t len)
{
	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	struct json j = {.out = f};
	jw_string(&j, s, len);
	fclose(f);
	return text;
}

static void check_string(const char *in, size_t len, const char *want, const char *what)
{
	char *got = string_json(in, len);
	check(strcmp(got, want) == 0, what);
	if (strcmp(got, want) != 0)
		printf("#   want %s\n#   got  %s\n", want, got);
	free(got);
}

static bool accepts(enum setting_id id, const char *text, long *number)
{
	struct config cfg = {0};
	char why[256];
	if (setting_set(&cfg, id, text, FROM_FLAG, why, sizeof why) < 0)
		return false;
	if (number)
		*number = cfg.number[id];
	return true;
}

/* U+2028 and U+2029 in what jansson writes: escaped, the value the same. */
static void test_separators(void)
{
	static const char value[] = "x\xe2\x80\xa8y\xe2\x80\xa9\xe2\x80\xa8";
	json_t *v = json_pack("{s:s, s:[s]}", "k\xe2\x80\xa9", value, "n", "\xc3\xa9");
	char *text = json_escape_separators(json_dumps(v, JSON_COMPACT));
	const char *want = "{\"k\\u2029\":\"x\\u2028y\\u2029\\u2028\",\"n\":[\"\xc3\xa9\"]}";
	check(text && strcmp(text, want) == 0, "json_escape_separators: jansson's raw U+2028 and "
		"U+2029 escaped, keys and values, other UTF-8 kept");
	if (text && strcmp(text, want) != 0)
		printf("#   want %s\n#   got  %s\n", want, text);
	json_t *back = text ? json_loads(text, 0, NULL) : NULL;
	check(back && json_equal(back, v), "json_escape_separators: the text still parses to the same value");
	json_decref(back);
	json_decref(v);
	free(text);
	char *plain = strdup("{\"a\":\"\xe2\x80\xa7\"}");
	check(json_escape_separators(plain) == plain, "json_escape_separators: text without them is "
		"given back as it is");
	free(plain);
	check(json_escape_separators(NULL) == NULL, "json_escape_separators: NULL (json_dumps failed) stays NULL");

	char *out = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&out, &size);
	struct json j = {.out = f};
	jw_raw(&j, "\"id\xe2\x80\xa8\"");
	fclose(f);
	check(strcmp(out, "\"id\\u2028\"") == 0, "jw_raw: a job's id as jansson wrote it, U+2028 escaped");
	free(out);
}

/* WebP's three first chunks, each with its size; cut short, none. */
static void test_webp(void)
{
	/* RIFF, its size, WEBP, then a chunk: its name, its length, its data. */
	static const unsigned char lossy[] = "RIFF\x40\0\0\0WEBPVP8 \x20\0\0\0"
		"\x10\x02\0" "\x9d\x01\x2a" "\x80\x02" "\xe0\x01";
	static const unsigned char lossless[] = "RIFF\x40\0\0\0WEBPVP8L\x20\0\0\0"
		"\x2f" "\x8f\xc1\x4a\x00";
	static const unsigned char extended[] = "RIFF\x40\0\0\0WEBPVP8X\x0a\0\0\0"
		"\x10\0\0\0" "\x3f\x9c\x00" "\x3f\x9c\x00";
	static const unsigned char inter[] = "RIFF\x40\0\0\0WEBPVP8 \x20\0\0\0"
		"\x11\x02\0" "\x9d\x01\x2a" "\x80\x02" "\xe0\x01";
	static const unsigned char unsigned_[] = "RIFF\x40\0\0\0WEBPVP8L\x20\0\0\0"
		"\x2e" "\x8f\xc1\x4a\x00";
	struct sniffed k;
	sniff(lossy, sizeof lossy - 1, true, &k);
	check(strcmp(k.media_type, "image/webp") == 0 && k.is_image && k.width == 640 &&
		k.height == 480, "sniff: WebP VP8 (lossy), its key frame's size");
	sniff(lossless, sizeof lossless - 1, true, &k);
	check(strcmp(k.media_type, "image/webp") == 0 && k.width == 400 && k.height == 300,
		"sniff: WebP VP8L (lossless), width - 1 and height - 1 in 14 bits");
	sniff(extended, sizeof extended - 1, true, &k);
	check(strcmp(k.media_type, "image/webp") == 0 && k.width == 40000 && k.height == 40000,
		"sniff: WebP VP8X (extended), the canvas in 24 bits");
	sniff(inter, sizeof inter - 1, true, &k);
	check(k.width == 0 && k.height == 0, "sniff: WebP VP8 that is not a key frame: no size");
	sniff(unsigned_, sizeof unsigned_ - 1, true, &k);
	check(k.width == 0 && k.height == 0, "sniff: WebP VP8L without its signature byte: no size");
	const unsigned char *whole[] = {lossy, lossless, extended};
	size_t lens[] = {sizeof lossy - 1, sizeof lossless - 1, sizeof extended - 1};
	bool none = true;
	for (int i = 0; i < 3; i++)
		for (size_t cut = 12; cut < lens[i]; cut++) {
			sniff(whole[i], cut, false, &k);
			none = none && strcmp(k.media_type, "image/webp") == 0 && k.width == 0 &&
				k.height == 0;
		}
	check(none, "sniff: WebP of each kind cut at every byte is WebP of size 0");
	static const unsigned char short_chunk[] = "RIFF\x40\0\0\0WEBPVP8X\x04\0\0\0"
		"\x10\0\0\0" "\x3f\x9c\x00" "\x3f\x9c\x00";
	sniff(short_chunk, sizeof short_chunk - 1, true, &k);
	check(k.width == 0, "sniff: a WebP chunk whose length is too short for its fields: no size");
}

/* What an MCP answer shows: up to 16 megapixels, SVG always, a raster
 * image without a size never. */
static void test_image_bound(void)
{
	struct not_shown r;
	struct sniffed png = {.media_type = "image/png", .is_image = true, .width = 4000,
		.height = 4000};
	check(mcp_image_fits(&png, &r), "mcp image: 4000x4000, exactly 16 megapixels, is shown");
	png.height = 4001;
	check(!mcp_image_fits(&png, &r) && strcmp(r.why, "4000x4001 pixels, more than the 16 "
		"megapixels an answer shows") == 0 && strstr(r.fix, "smaller"),
		"mcp image: one row more is not, and the line says why");
	png.width = png.height = 40000;
	check(!mcp_image_fits(&png, &r) && strstr(r.why, "40000x40000 pixels"),
		"mcp image: 40000x40000 is not");
	png.width = png.height = 0xffffffffu;
	check(!mcp_image_fits(&png, &r), "mcp image: the largest PNG header does not overflow the product");
	png.width = 0;
	check(!mcp_image_fits(&png, &r) && strstr(r.why, "no pixel size"),
		"mcp image: a raster image whose size is unknown is not shown");
	struct sniffed webp = {.media_type = "image/webp", .is_image = true, .width = 1 << 24,
		.height = 1};
	check(!mcp_image_fits(&webp, &r), "mcp image: a 16777216x1 WebP canvas is not shown");
	struct sniffed svg = {.media_type = "image/svg+xml", .is_image = true};
	struct sniffed text = {.media_type = "text/plain"};
	check(mcp_image_fits(&svg, &r) && mcp_image_fits(&text, &r),
		"mcp image: SVG has no pixel size and is shown; what is not an image is not judged");
}

/* Media types and pixel sizes from hand-made headers, bounds checked. */
static void test_sniff(void)
{
	static const unsigned char png[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\x02\x74\0\0\x01\xd4";
	static const unsigned char jpeg[] = "\xff\xd8\xff\xe0\0\x04" "ab\xff\xc0\0\x11\x08\x01\xe0\x02\x80";
	static const unsigned char gif[] = "GIF89a\x40\x01\xf0\0";
	struct sniffed k;
	sniff(png, sizeof png - 1, true, &k);
	check(strcmp(k.media_type, "image/png") == 0 && k.width == 628 && k.height == 468,
		"sniff: PNG and its IHDR size");
	sniff(png, 20, false, &k);
	check(strcmp(k.media_type, "image/png") == 0 && k.width == 0, "sniff: a PNG cut short has no size");
	sniff(jpeg, sizeof jpeg - 1, true, &k);
	check(strcmp(k.media_type, "image/jpeg") == 0 && k.width == 640 && k.height == 480,
		"sniff: JPEG, its size from the SOF after an APP0");
	static const unsigned char bad_jpeg[] = "\xff\xd8\xff\xe0\xff\xff";
	sniff(bad_jpeg, sizeof bad_jpeg - 1, true, &k);
	check(strcmp(k.media_type, "image/jpeg") == 0 && k.width == 0,
		"sniff: a JPEG segment length past the end is not followed");
	static const unsigned char jpeg_fill[] = "\xff\xd8\xff\xff\xff\xc2\0\x11\x08\x00\x10\x00\x20";
	sniff(jpeg_fill, sizeof jpeg_fill - 1, true, &k);
	check(k.width == 32 && k.height == 16, "sniff: JPEG, fill bytes before a progressive SOF");
	static const unsigned char jpeg_sos[] = "\xff\xd8\xff\xda\0\x04" "ab\xff\xc0\0\x11\x08\x01\xe0\x02\x80";
	sniff(jpeg_sos, sizeof jpeg_sos - 1, true, &k);
	check(strcmp(k.media_type, "image/jpeg") == 0 && k.width == 0,
		"sniff: a JPEG's scan before any frame header: no size");
	static const unsigned char jpeg_zero[] = "\xff\xd8\xff\xe0\0\0\xff\xc0\0\x11\x08\x01\xe0\x02\x80";
	sniff(jpeg_zero, sizeof jpeg_zero - 1, true, &k);
	check(k.width == 0, "sniff: a JPEG segment length below 2 is not followed");
	sniff(jpeg, sizeof jpeg - 2, false, &k);
	check(strcmp(k.media_type, "image/jpeg") == 0 && k.width == 0 && k.height == 0,
		"sniff: a JPEG frame header cut by the end of the head: no size");
	bool sizeless = true;
	for (size_t cut = 0; cut < sizeof jpeg - 1; cut++) {
		sniff(jpeg, cut, false, &k); /* with ASan or valgrind: nothing read past cut */
		sizeless = sizeless && k.width == 0;
	}
	check(sizeless, "sniff: a JPEG cut at every byte has no size until it is whole");
	sniff(gif, sizeof gif - 1, true, &k);
	check(strcmp(k.media_type, "image/gif") == 0 && k.width == 320 && k.height == 240, "sniff: GIF");
	test_webp();
	const char *svg = "<?xml version=\"1.0\"?>\n<!DOCTYPE svg>\n<svg xmlns=\"x\"></svg>";
	sniff((const unsigned char *)svg, strlen(svg), true, &k);
	check(strcmp(k.media_type, "image/svg+xml") == 0 && k.is_image, "sniff: SVG after a declaration");
	const char *html = "<html><svg></svg></html>";
	sniff((const unsigned char *)html, strlen(html), true, &k);
	check(strcmp(k.media_type, "text/plain") == 0, "sniff: HTML holding an <svg> is text, not SVG");
	sniff((const unsigned char *)"a,b\n1,2\n", 8, true, &k);
	check(strcmp(k.media_type, "text/plain") == 0, "sniff: UTF-8 text");
	sniff((const unsigned char *)"a\0b", 3, true, &k);
	check(strcmp(k.media_type, "application/octet-stream") == 0, "sniff: a NUL byte is binary");
	sniff((const unsigned char *)"PNG.png", 0, true, &k);
	check(strcmp(k.media_type, "application/x-empty") == 0, "sniff: empty");
}

static void test_base64(void)
{
	struct buffer enc = {0}, dec = {0};
	base64_encode((const unsigned char *)"Sage!", 5, &enc);
	check(strcmp(enc.data, "U2FnZSE=") == 0, "base64: encodes with padding");
	check(base64_decode(enc.data, enc.len, &dec) && dec.len == 5 && memcmp(dec.data, "Sage!", 5) == 0,
		"base64: decodes what it encoded");
	buffer_free(&dec);
	check(!base64_decode("U2FnZSE", 7, &dec), "base64: a length that is not a multiple of 4 is refused");
	buffer_free(&dec);
	check(!base64_decode("U2F!ZSE=", 8, &dec), "base64: a byte outside the alphabet is refused");
	buffer_free(&dec);
	check(!base64_decode("U2==ZSE=", 8, &dec), "base64: padding inside is refused");
	buffer_free(&dec);
	buffer_free(&enc);
}

/* One rule for the names that cross the boundary, in and out. */
static void test_names(void)
{
	check(name_part_allowed("sin.png", 7) && name_part_allowed("\xc3\xa9" "t" "\xc3\xa9", 5),
		"names: printable UTF-8 parts pass");
	check(!name_part_allowed(".", 1) && !name_part_allowed("..", 2) && !name_part_allowed("", 0),
		"names: '.', '..' and empty parts are refused");
	check(!name_part_allowed("a/b", 3) && !name_part_allowed("a\nb", 3) &&
		!name_part_allowed("a\xc2\x9b" "b", 4) && !name_part_allowed("a\xff" "b", 3),
		"names: '/', C0, C1 and invalid UTF-8 are refused in a part");
	check(!name_part_allowed("e\xe2\x80\xae" "ftx.tex", 10) &&
		!name_part_allowed("a\xe2\x81\xa6" "b", 5) && !name_part_allowed("a\xd8\x9c" "b", 4) &&
		!name_part_allowed("a\xe2\x80\x8f" "b", 5) && !name_part_allowed("a\xe2\x80\xa8" "b", 5),
		"names: bidirectional controls and line separators are refused in a part");
	check(name_part_allowed("a\xe2\x80\x94" "b", 5) && name_part_allowed("\xe2\x82\xac", 3),
		"names: other punctuation and symbols of U+2000-U+20FF pass (an em dash, the euro)");
	char deep[64] = "";
	for (int i = 0; i < NAMES_MAX_DEPTH; i++)
		strcat(deep, "d/");
	strcat(deep, "f");
	check(relative_path_allowed(deep, strlen(deep)), "names: 16 directories deep pass");
	memmove(deep + 2, deep, strlen(deep) + 1);
	memcpy(deep, "d/", 2);
	check(!relative_path_allowed(deep, strlen(deep)), "names: 17 directories deep are refused");
	check(!relative_path_allowed("a//b", 4) && !relative_path_allowed("/a", 2) &&
		!relative_path_allowed("a/../b", 6), "names: paths with empty or '..' parts are refused");
	char *shown = printable_name("a\nb\\\xff\xc3\xa9", 7, 200);
	check(strcmp(shown, "a\\x0ab\\x5c\\xff\xc3\xa9") == 0, "names: a refused name shown as \\xNN");
	free(shown);
	/* Attack helper 162: unseen characters were shown raw, a cut had no
	 * mark of it. */
	shown = printable_name("a\xe2\x80\x8b" "b\xef\xbb\xbf", 8, 200);
	check(strcmp(shown, "a\\xe2\\x80\\x8bb\\xef\\xbb\\xbf") == 0,
		"names: a zero-width space and a byte order mark shown as \\xNN");
	free(shown);
	/* U+E0041, a tag: text a reader does not see and a model reads. */
	shown = printable_name("a\xf3\xa0\x81\x81" "b", 6, 200);
	check(strcmp(shown, "a\\xf3\\xa0\\x81\\x81b") == 0, "names: a tag character shown as \\xNN");
	free(shown);
	shown = printable_name("a\xf3\xa0\x84\x81" "b", 6, 200);
	check(strcmp(shown, "a\\xf3\\xa0\\x84\\x81b") == 0,
		"names: a supplementary variation selector (U+E0101) shown as \\xNN");
	free(shown);
	check(shown_as_is("caf\xc3\xa9/p\xc3\xb6" "dman", 13) && !shown_as_is("a\xe2\x80\x8b" "b", 5) &&
		!shown_as_is("a\x1b", 2) && !shown_as_is("\xff", 1),
		"names: shown_as_is: printable text yes; unseen, controls, bad bytes no");
	check(reads_as_one_word("/opt/caf\xc3\xa9/podman") && !reads_as_one_word("/opt/a b") &&
		!reads_as_one_word("/opt/a\xc2\xa0" "b") && !reads_as_one_word("a\xe2\x80\x89" "b") &&
		!reads_as_one_word("a\xe3\x80\x80" "b") && !reads_as_one_word("a\xe2\x80\x8b" "b") &&
		shown_as_is("a\xc2\xa0" "b", 4),
		"names: reads_as_one_word: no space of any kind (no-break, thin, ideographic), "
		"nothing unseen");
	shown = printable_name("abcd\xc3\xa9" "fgh", 9, 7);
	check(strcmp(shown, "abcd\xe2\x80\xa6") == 0, "names: a cut ends in an ellipsis, "
		"before a whole character");
	free(shown);
	shown = printable_name("abcdefg", 7, 7);
	check(strcmp(shown, "abcdefg") == 0, "names: a name that just fits is not cut");
	free(shown);
	struct error e;
	error_set(&e, 125, "fix\tit", "bad '%s'", "x\n\x1b[31my\\");
	check(strcmp(e.message, "bad 'x\\x0a\\x1b[31my\\'") == 0 && strcmp(e.hint, "fix\\x09it") == 0,
		"error: a message and a hint are one line, escapes shown, backslashes kept");
	char long_value[700];
	memset(long_value, 'v', sizeof long_value - 1);
	long_value[sizeof long_value - 1] = '\0';
	error_set(&e, 125, NULL, "bad %s", long_value);
	check(strlen(e.message) == sizeof e.message - 1 &&
		strcmp(e.message + strlen(e.message) - 3, "\xe2\x80\xa6") == 0,
		"error: a message past 512 bytes ends in an ellipsis");
}

/* The receiver against a hostile sender, in a directory of its own. */
static void test_outfiles(void)
{
	char dir[] = "/tmp/sage-sandbox-unit-XXXXXX", path[256];
	struct config cfg = {0};
	struct outfiles o;
	struct error err;
	struct stat st;
	if (!mkdtemp(dir))
		abort();
	cfg.number[SET_OUTPUT_FILES] = 3;
	cfg.number[SET_OUTPUT_FILE_SIZE] = 10;
	cfg.number[SET_OUTPUT_SIZE] = 14;
	snprintf(path, sizeof path, "%s/elsewhere", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/out", dir);
	mkdir(path, 0700);
	snprintf(path, sizeof path, "%s/out/linked", dir);
	if (symlink("../elsewhere", path) < 0)
		abort();
	snprintf(path, sizeof path, "%s/out", dir);
	check(outfiles_open(&o, path, false, &cfg, &err) == 0, "outfiles: opens a writable directory");
	static const char *const refused[] = {"../x", "/abs", "a//b", "a/./b", ".", "a\nb", "bad\xff",
		"linked/x", NULL};
	for (const char *const *n = refused; *n; n++) {
		outfiles_frame(&o, 'F', *n, strlen(*n));
		outfiles_frame(&o, 'D', "x", 1);
		outfiles_frame(&o, 'G', "", 0);
	}
	check(o.count == 0 && o.dropped_count == 8, "outfiles: bad names and a linked directory are dropped");
	snprintf(path, sizeof path, "%s/elsewhere", dir);
	check(rmdir(path) == 0, "outfiles: nothing written through the link");
	outfiles_frame(&o, 'F', "a/b.txt", 7);
	outfiles_frame(&o, 'D', "hello", 5);
	outfiles_frame(&o, 'G', "", 0);
	snprintf(path, sizeof path, "%s/out/a/b.txt", dir);
	check(o.count == 1 && stat(path, &st) == 0 && st.st_size == 5 &&
		strcmp(o.files[0].sha256,
			"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824") == 0,
		"outfiles: a file in a new directory, with its sha256");
	outfiles_frame(&o, 'F', "big", 3);
	outfiles_frame(&o, 'D', "0123456789", 10);
	outfiles_frame(&o, 'D', "x", 1);
	outfiles_frame(&o, 'G', "", 0);
	snprintf(path, sizeof path, "%s/out/big", dir);
	check(o.count == 1 && stat(path, &st) < 0, "outfiles: past the file cap while receiving, nothing kept");
	outfiles_frame(&o, 'F', "c", 1);
	outfiles_frame(&o, 'D', "0123456789", 10);
	outfiles_frame(&o, 'G', "", 0);
	check(o.count == 1, "outfiles: past the total cap, dropped");
	outfiles_frame(&o, 'F', "a/b.txt", 7);
	outfiles_frame(&o, 'G', "", 0);
	check(o.count == 1, "outfiles: an existing name is kept");
	outfiles_frame(&o, 'F', "half", 4);
	outfiles_frame(&o, 'D', "ab", 2);
	outfiles_stopped(&o);
	snprintf(path, sizeof path, "%s/out/half", dir);
	check(stat(path, &st) < 0, "outfiles: a file cut by a stop is not kept");
	check(outfiles_first_show(&o) == 1, "outfiles: show-1 first where no show-N is there");
	static const char *const shows[] = {"show-2.png", "show-4.tar.gz", "show-+9.png",
		"show-7", "show-x.png", "show-12345678.png", NULL};
	for (const char *const *n = shows; *n; n++) {
		snprintf(path, sizeof path, "%s/out/%s", dir, *n);
		close(open(path, O_WRONLY | O_CREAT, 0600));
	}
	check(outfiles_first_show(&o) == 5, "outfiles: show-N after the highest show-N.ANYTHING "
		"there, N digits only (as launcher/display.py counts)");
	outfiles_close(&o);
	snprintf(path, sizeof path, "%s/out", dir);
	outfiles_remove_dir(path);
	check(rmdir(dir) == 0, "outfiles: no temporary file left; the tree removes whole");
}

/* --shard's values, and a batch's lines checked without a sandbox. */
static void test_jobs(void)
{
	long long k = -1, n = -1;
	struct error err;
	check(parse_shard("2/5", &k, &n, &err) == 0 && k == 2 && n == 5, "shard: K/N");
	check(parse_shard("5/5", &k, &n, &err) < 0 && parse_shard("-1/3", &k, &n, &err) < 0 &&
		parse_shard("1/0", &k, &n, &err) < 0 && parse_shard("1/2x", &k, &n, &err) < 0 &&
		parse_shard("x", &k, &n, &err) < 0, "shard: K >= N, negatives, junk refused");
	check(parse_shard(" 1/4", &k, &n, &err) < 0 && parse_shard("1/ 4", &k, &n, &err) < 0 &&
		parse_shard("+1/4", &k, &n, &err) < 0 && parse_shard("auto/ 4", &k, &n, &err) < 0,
		"shard: a blank or a sign before a number refused");
	/* N past 64 bits was taken as the largest: a shard of nothing, exit 0. */
	check(parse_shard("1/99999999999999999999", &k, &n, &err) < 0 &&
		parse_shard("99999999999999999999/3", &k, &n, &err) < 0 &&
		parse_shard("auto/99999999999999999999", &k, &n, &err) < 0 &&
		parse_shard("auto/", &k, &n, &err) < 0, "shard: numbers past 64 bits refused");
	check(parse_shard("1/99999999999999999999", &k, &n, &err) < 0 &&
		strstr(err.message, "(N is past 64 bits)") &&
		parse_shard("99999999999999999999/3", &k, &n, &err) < 0 &&
		strstr(err.message, "(K is past 64 bits)") &&
		parse_shard("x/3", &k, &n, &err) < 0 && !strstr(err.message, "64 bits"),
		"shard: ... and said to be");
	/* --shard auto from Slurm's variables; n 0: refused, saying says. */
	static const struct {
		const char *id, *min, *step, *count, *shard;
		long long k, n;
		const char *says, *what;
	} slurm[] = {
		{"14", "10", "2", "4", "auto", 2, 4, NULL,
		 "shard: auto from a Slurm array of --array=10-16:2"},
		/* atoll took "4x" as 4 and "x" as 0: a shard from a misread number. */
		{"14", "10", "2", "4x", "auto", 0, 0, "SLURM_ARRAY_TASK_COUNT='4x' is not a whole number",
		 "shard: a Slurm variable that is not a number is refused, by name"},
		{"x", "10", "2", "4", "auto", 0, 0, "SLURM_ARRAY_TASK_ID",
		 "shard: ... the task's id too"},
		{" 12", "10", "2", "4", "auto", 0, 0, NULL, "shard: ... with a blank before it too"},
		{"12", "10", "2", "x", "auto/4", 1, 4, NULL,
		 "shard: auto/N does not read SLURM_ARRAY_TASK_COUNT"},
		{"9223372036854775807", "-5", "2", "4", "auto", 0, 0, NULL,
		 "shard: an id less its minimum past 64 bits is refused"},
		{"9", "10", "2", "4", "auto", 0, 0, "is not an array task",
		 "shard: an id below its minimum is refused, by name"},
		/* Attack helper 162: a step of 0 was taken as 1; an id off
		 * the array's grid was rounded down to a task; a count of 0 was
		 * "not set"; a number past 64 bits "not a whole number". */
		{"12", "10", "0", "4", "auto", 0, 0, "SLURM_ARRAY_TASK_STEP 0 is not a step",
		 "shard: a step of 0 is refused"},
		{"12", "10", "-2", "4", "auto", 0, 0, "SLURM_ARRAY_TASK_STEP -2 is not a step",
		 "shard: a negative step is refused"},
		{"13", "10", "2", "4", "auto", 0, 0, "is not an array task from",
		 "shard: an id between the array's tasks is refused"},
		{"12", "10", "2", "0", "auto", 0, 0, "SLURM_ARRAY_TASK_COUNT 0 is not a count",
		 "shard: a count of 0 is refused as 0, not as unset"},
		{"99999999999999999999", "10", "2", "4", "auto", 0, 0, "not a whole number of 64 bits",
		 "shard: an id past 64 bits is said to be"},
		{"12", "10", "2", "-3", "auto", 0, 0, "SLURM_ARRAY_TASK_COUNT -3 is not a count",
		 "shard: a negative count is refused by its value, not as unset"},
		{"12", "10", "2", "", "auto", 0, 0, "SLURM_ARRAY_TASK_COUNT is not set",
		 "shard: ... and an unset one as unset"},
	};
	for (size_t i = 0; i < sizeof slurm / sizeof *slurm; i++) {
		setenv("SLURM_ARRAY_TASK_ID", slurm[i].id, 1);
		setenv("SLURM_ARRAY_TASK_MIN", slurm[i].min, 1);
		setenv("SLURM_ARRAY_TASK_STEP", slurm[i].step, 1);
		setenv("SLURM_ARRAY_TASK_COUNT", slurm[i].count, 1);
		int rc = parse_shard(slurm[i].shard, &k, &n, &err);
		check(slurm[i].n ? rc == 0 && k == slurm[i].k && n == slurm[i].n :
			rc < 0 && (!slurm[i].says || strstr(err.message, slurm[i].says)), slurm[i].what);
	}
	setenv("SLURM_ARRAY_TASK_COUNT", "99999999999999999999x", 1);
	check(parse_shard("auto", &k, &n, &err) < 0 && strstr(err.message, "whole number") &&
		!strstr(err.message, "64 bits"),
		"shard: junk after too many digits is not called too large");
	unsetenv("SLURM_ARRAY_TASK_MIN");
	unsetenv("SLURM_ARRAY_TASK_STEP");
	unsetenv("SLURM_ARRAY_TASK_COUNT");
	unsetenv("SLURM_ARRAY_TASK_ID");
	setenv("JOB_COMPLETION_INDEX", "3", 1);
	check(parse_shard("auto/4", &k, &n, &err) == 0 && k == 3 && n == 4 &&
		parse_shard("auto", &k, &n, &err) < 0 && parse_shard("auto/3", &k, &n, &err) < 0,
		"shard: auto/N from a Kubernetes index; an index past N refused");
	setenv("JOB_COMPLETION_INDEX", "-1", 1);
	check(parse_shard("auto/4", &k, &n, &err) < 0 &&
		strstr(err.message, "JOB_COMPLETION_INDEX -1 is not an index from 0"),
		"shard: a negative Kubernetes index is refused as such (not as 'not below N')");
	setenv("JOB_COMPLETION_INDEX", "1e3", 1);
	check(parse_shard("auto/4", &k, &n, &err) < 0 && strstr(err.message, "JOB_COMPLETION_INDEX"),
		"shard: a Kubernetes index that is not a number is refused");
	unsetenv("JOB_COMPLETION_INDEX");

	char path[] = "/tmp/sage-sandbox-unit-jobs-XXXXXX";
	int fd = mkstemp(path);
	const char lines[] =
		"{\"id\": 1, \"code\": \"print(1)\", \"timeout\": 5, \"args\": [\"a\"]}\n"
		"\n"
		"{\"id\": 2, \"code\": \"x\", \"timeout\": 500}\n"
		"{\"id\": 3, \"id\": 4, \"code\": \"x\"}\n"
		"{\"id\": \"\", \"code\": \"x\"}\n"
		"{\"id\": 5, \"code\": \"x\", \"files\": {\"../up\": \"x\"}}\n"
		"{\"id\": 6, \"code\": \"last\"}";
	check(write(fd, lines, sizeof lines - 1) == (ssize_t)(sizeof lines - 1), "jobs: file written");
	close(fd);
	struct config cfg;
	char why[256];
	config_init(&cfg, (const char *[SETTING_COUNT]){0}, false, why, sizeof why);
	char *files[] = {path};
	struct job_source *src = job_source_open(files, 1, &cfg, 0, 0, true, NULL, &err);
	check(src && job_source_total(src) == 6, "jobs: six non-blank lines counted ahead");
	struct job *got[8] = {0};
	int count = 0;
	while (src && count < 8 && job_source_next(src, &got[count]) == 1)
		count++;
	check(count == 6, "jobs: six jobs read");
	check(count == 6 && !got[0]->bad && got[0]->cfg.number[SET_TIMEOUT] == 5 &&
		got[0]->argc == 2 && strcmp(got[0]->argv[1], "a") == 0 && strcmp(got[0]->id, "1") == 0,
		"jobs: a good line: its id, its lower timeout, its args");
	check(count == 6 && got[1]->bad && got[1]->line == 3 &&
		strstr(got[1]->err.message, "timeout must be an integer from 1 to 60"),
		"jobs: a timeout above the batch's refused, with its line number");
	check(count == 6 && got[2]->bad && strstr(got[2]->err.message, "not JSON") &&
		got[3]->bad && strstr(got[3]->err.message, "id must be"),
		"jobs: duplicate keys and an empty id refused");
	check(count == 6 && got[4]->bad && strstr(got[4]->err.message, "files:"),
		"jobs: a file name that climbs out refused");
	check(count == 6 && !got[5]->bad && got[5]->line == 7 && got[5]->ordinal == 5 &&
		strcmp(got[5]->code, "last") == 0, "jobs: a last line without its newline");
	for (int i = 0; i < count; i++)
		job_free(got[i]);
	job_source_close(src);
	src = job_source_open(files, 1, &cfg, 1, 4, true, NULL, &err);
	count = 0;
	while (src && count < 8 && job_source_next(src, &got[count]) == 1)
		count++;
	check(count == 2 && job_source_total(src) == 2 && got[0]->ordinal == 1 &&
		got[1]->ordinal == 5, "jobs: --shard 1/4 takes ordinals 1 and 5");
	for (int i = 0; i < count; i++)
		job_free(got[i]);
	job_source_close(src);
	unlink(path);
}

/* The settings file: NAME = VALUE lines, comments, what is refused and
 * where; its values ranked below flags and the environment. */
static void test_settings_file(void)
{
	const char *values[SETTING_COUNT];
	int line[SETTING_COUNT];
	char why[512];
	char good[] = "# mine\n  timeout = 30 \n\nmemory=2g\r\n";
	check(settings_file_parse(good, sizeof good - 1, "f", values, line, why, sizeof why) == 0 &&
		strcmp(values[SET_TIMEOUT], "30") == 0 && line[SET_TIMEOUT] == 2 &&
		strcmp(values[SET_MEMORY], "2g") == 0 && line[SET_MEMORY] == 4 && !values[SET_CPUS],
		"settings file: NAME = VALUE, blanks and comments, CR LF");
	char twice[] = "cpus = 1\ncpus = 2\n";
	check(settings_file_parse(twice, sizeof twice - 1, "f", values, line, why, sizeof why) < 0 &&
		strcmp(why, "settings file f, line 2: cpus is already set on line 1") == 0,
		"settings file: a name given twice is refused, with both lines");
	char unknown[] = "\nsessions = 2\nspeed = 11\n";
	check(settings_file_parse(unknown, sizeof unknown - 1, "f", values, line, why, sizeof why) < 0 &&
		strncmp(why, "settings file f, line 3: unknown setting 'speed'", 48) == 0,
		"settings file: an unknown name is refused, with its line");
	char bytes[] = "\xff\xfe = 1\n";
	check(settings_file_parse(bytes, sizeof bytes - 1, "f", values, line, why, sizeof why) < 0 &&
		strncmp(why, "settings file f, line 1: unknown setting '\\xff\\xfe';", 52) == 0,
		"settings file: an unknown name of other bytes is shown escaped");
	char long_name[200];
	snprintf(long_name, sizeof long_name, "%s\xc3\xa9xyz = 1\n",
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"); /* 63 */
	check(settings_file_parse(long_name, strlen(long_name), "f", values, line, why,
		sizeof why) < 0 && strstr(why, " 'aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\xe2\x80\xa6';"),
		"settings file: a long unknown name is cut to 64 bytes, before a whole character, "
		"ending in an ellipsis");
	memset(long_name, 0x80, 100);
	snprintf(long_name + 100, sizeof long_name - 100, " = 1\n");
	check(settings_file_parse(long_name, strlen(long_name), "f", values, line, why,
		sizeof why) < 0 && strstr(why, "'\\x80\\x80"),
		"settings file: a name of continuation bytes alone is shown escaped, not empty");
	char no_equals[] = "timeout 30\n";
	check(settings_file_parse(no_equals, sizeof no_equals - 1, "f", values, line, why, sizeof why) < 0 &&
		strcmp(why, "settings file f, line 1: not NAME = VALUE") == 0,
		"settings file: a line that is not NAME = VALUE is refused");
	char nul[] = "timeout = 3\0\n";
	check(settings_file_parse(nul, sizeof nul - 1, "f", values, line, why, sizeof why) < 0,
		"settings file: a NUL byte is refused");
}

/* The text of dir/file, its first line. */
static void read_line(const char *dir, const char *file, char *out, size_t size)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	FILE *f = fopen(path, "r");
	out[0] = '\0';
	if (f && fgets(out, (int)size, f))
		out[strcspn(out, "\n")] = '\0';
	if (f)
		fclose(f);
}

static void write_text(const char *dir, const char *file, const char *text)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%s", dir, file);
	FILE *f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

/* A process of another user than this test's, as a container's process is
 * to the account: pid 1 (root's), or, for root, a child that became
 * nobody (*child set, to be killed). */
static pid_t other_users_process(pid_t *child)
{
	*child = 0;
	if (geteuid() != 0)
		return 1;
	int ready[2];
	if (pipe(ready) < 0)
		return 1;
	*child = fork();
	if (*child == 0) {
		close(ready[0]);
		if (setgid(65534) < 0 || setuid(65534) < 0)
			_exit(1);
		close(ready[1]);
		pause();
		_exit(0);
	}
	close(ready[1]);
	char c;
	while (read(ready[0], &c, 1) > 0)
		;
	close(ready[0]);
	return *child > 0 ? *child : 1;
}

/* cpugroup.c's file handling, on plain directories standing for the
 * delegated group and a container's (the kernel makes a group's files;
 * here the test does). */
static void test_cpugroup(void)
{
	char dir[] = "/tmp/unit-cpugroup-XXXXXX", quota[32];
	struct cpugroup g;
	check(mkdtemp(dir) != NULL, "cpugroup: a directory for the delegated group");
	check(cpugroup_create(&g, dir, "sage-sandbox-0123456789abcdef") == 0,
		"cpugroup: a container's group is made in it");
	write_text(g.path, "cpu.cfs_quota_us", "-1\n");
	write_text(g.path, "cpu.stat", "nr_periods 10\nnr_throttled 3\nthrottled_time 5000000\n");
	check(cpugroup_hold(&g, 250, 1000) == 0, "cpugroup: held at --cpus 0.25");
	read_line(g.path, "cpu.cfs_quota_us", quota, sizeof quota);
	check(strcmp(quota, "25000") == 0, "cpugroup: the quota is a quarter of the 100 ms period");
	check(!cpugroup_throttled(&g, 1100), "cpugroup: not throttled since it was held");
	write_text(g.path, "cpu.stat", "nr_periods 12\nnr_throttled 4\nthrottled_time 35000000\n");
	check(cpugroup_throttled(&g, 1200), "cpugroup: held back 30 ms of the last 100: told");
	check(!cpugroup_throttled(&g, 1300), "cpugroup: and told once");
	write_text(g.path, "cpu.stat", "nr_periods 14\nnr_throttled 6\nthrottled_time 40000000\n");
	check(!cpugroup_throttled(&g, 1400),
		"cpugroup: throttled twice for 5 ms of 100 (a thread at its share, at periods' ends): "
		"no hold");
	write_text(g.path, "cpu.stat", "nr_periods 14\nnr_throttled 7\nthrottled_time 42000000\n");
	check(!cpugroup_throttled(&g, 1410),
		"cpugroup: ... nor 2 ms in a look 10 ms after the last (a tenth of a period at least)");
	/* A hold's last moments, throttled since its last look, are the
	 * hold's: told as it is lifted, and nothing left for the next call's
	 * looks. */
	write_text(g.path, "cpu.stat", "nr_periods 16\nnr_throttled 9\nthrottled_time 82000000\n");
	check(cpugroup_lift(&g, 1500), "cpugroup: held back 40 ms since the last look: told as "
		"the hold is lifted");
	check(!cpugroup_throttled(&g, 1600), "cpugroup: ... and never to a look after");
	/* cpu.stat unreadable (out of descriptors) is no count of 0: the
	 * look after would read the group's whole life as its own. */
	char stat_path[700], aside[720];
	snprintf(stat_path, sizeof stat_path, "%s/cpu.stat", g.path);
	snprintf(aside, sizeof aside, "%s.aside", stat_path);
	rename(stat_path, aside);
	check(!cpugroup_lift(&g, 1700) && !cpugroup_throttled(&g, 1700),
		"cpugroup: an unreadable count tells no hold");
	/* ... nor the throttles that came while it could not be read: the
	 * hold's last moments, where its lift could not read them. */
	write_text(g.path, "cpu.stat.aside", "nr_periods 18\nnr_throttled 12\nthrottled_time 122000000\n");
	rename(aside, stat_path);
	check(!cpugroup_throttled(&g, 1800), "cpugroup: ... nor, read again, all the throttles "
		"before it");
	write_text(g.path, "cpu.stat", "nr_periods 20\nnr_throttled 14\nthrottled_time 152000000\n");
	check(cpugroup_throttled(&g, 1900), "cpugroup: ... and the look after that tells its own");
	/* A hold that could not read the count starts none: its first look
	 * tells nothing of what came before it. */
	rename(stat_path, aside);
	check(cpugroup_hold(&g, 250, 2000) == 0, "cpugroup: held with the count unreadable");
	write_text(g.path, "cpu.stat.aside", "nr_periods 22\nnr_throttled 16\nthrottled_time 192000000\n");
	rename(aside, stat_path);
	check(!cpugroup_throttled(&g, 2100), "cpugroup: its first look tells none of the "
		"throttles before the hold");
	check(cpugroup_hold(&g, 250, 2100) == 0, "cpugroup: held again");
	/* A lift whose quota cannot be written (out of descriptors; here a
	 * directory where the file was) leaves the group held: what it holds
	 * back meanwhile is the launcher's, no call's, and each look tries the
	 * lift again. */
	char quota_path[700], quota_aside[720];
	snprintf(quota_path, sizeof quota_path, "%s/cpu.cfs_quota_us", g.path);
	snprintf(quota_aside, sizeof quota_aside, "%s.aside", quota_path);
	check(rename(quota_path, quota_aside) == 0 && mkdir(quota_path, 0755) == 0,
		"cpugroup: the quota made unwritable");
	write_text(g.path, "cpu.stat", "nr_periods 23\nnr_throttled 17\nthrottled_time 222000000\n");
	check(cpugroup_lift(&g, 2200), "cpugroup: a lift not written still tells the hold's own "
		"last moments");
	write_text(g.path, "cpu.stat", "nr_periods 24\nnr_throttled 18\nthrottled_time 262000000\n");
	check(!cpugroup_throttled(&g, 2300), "cpugroup: ... but what the group holds back after "
		"it is no call's");
	write_text(g.path, "cpu.stat", "nr_periods 25\nnr_throttled 19\nthrottled_time 302000000\n");
	check(!cpugroup_lift(&g, 2400), "cpugroup: ... nor is it a later lift's");
	rmdir(quota_path);
	rename(quota_aside, quota_path);
	write_text(g.path, "cpu.stat", "nr_periods 26\nnr_throttled 20\nthrottled_time 342000000\n");
	check(!cpugroup_lift(&g, 2500), "cpugroup: ... nor the lift's that is written at last");
	read_line(g.path, "cpu.cfs_quota_us", quota, sizeof quota);
	check(strcmp(quota, "-1") == 0, "cpugroup: ... which it is");
	rename(quota_path, quota_aside);
	mkdir(quota_path, 0755);
	cpugroup_lift(&g, 2600);
	write_text(g.path, "cpu.stat", "nr_periods 27\nnr_throttled 21\nthrottled_time 382000000\n");
	rmdir(quota_path);
	rename(quota_aside, quota_path);
	check(!cpugroup_throttled(&g, 2700), "cpugroup: a look writes an owed lift, and tells "
		"nothing of the time before");
	read_line(g.path, "cpu.cfs_quota_us", quota, sizeof quota);
	check(strcmp(quota, "-1") == 0, "cpugroup: ... the quota lifted");
	write_text(g.path, "cpu.stat", "nr_periods 28\nnr_throttled 22\nthrottled_time 422000000\n");
	check(cpugroup_throttled(&g, 2800), "cpugroup: ... and the look after it counts again");
	check(cpugroup_hold(&g, 250, 2900) == 0, "cpugroup: held again");
	pid_t child;
	char procs[32];
	snprintf(procs, sizeof procs, "%d\n", (int)other_users_process(&child));
	char runc[600];
	snprintf(runc, sizeof runc, "%s/runc-made", g.path);
	mkdir(runc, 0755);
	write_text(g.path, "cgroup.procs", "");
	write_text(runc, "cgroup.procs", procs);
	/* pid 1 for a test not run as root: listed, its signal refused. */
	check(cpugroup_kill(&g) == 1, "cpugroup: the container's process in the runtime's group "
		"below it killed, once");
	if (child > 0) {
		int status;
		check(waitpid(child, &status, 0) == child && WIFSIGNALED(status) &&
			WTERMSIG(status) == SIGKILL, "cpugroup: by SIGKILL");
	}
	snprintf(procs, sizeof procs, "%d\n", (int)getpid());
	write_text(runc, "cgroup.procs", procs);
	check(cpugroup_kill(&g) == 0, "cpugroup: the account's own processes (podman's) are not "
		"the container's");
	/* Every process of this test's uid is outside a group of plain
	 * directories; no process has a uid never given. */
	FILE *mounts = fopen("/proc/self/mountinfo", "re");
	char line[4096];
	struct cpu_mount m;
	bool cpu_mounted = false;
	while (mounts && !cpu_mounted && fgets(line, sizeof line, mounts))
		cpu_mounted = cpugroup_cpu_mount(line, &m);
	if (mounts)
		fclose(mounts);
	if (cpu_mounted)
		check(cpugroup_outside(&g, geteuid()) > 0, "cpugroup: a process of the run's uid "
			"outside the group is named");
	check(cpugroup_outside(&g, 3999999) == 0, "cpugroup: a run with no process left has none "
		"outside (its frame read after its end)");
	write_text(runc, "cgroup.procs", "");
	cpugroup_lift(&g, 1900);
	read_line(g.path, "cpu.cfs_quota_us", quota, sizeof quota);
	check(strcmp(quota, "-1") == 0, "cpugroup: no quota between calls");
	char path[700];
	snprintf(path, sizeof path, "%s/cpu.stat", g.path);
	unlink(path);
	snprintf(path, sizeof path, "%s/cpu.cfs_quota_us", g.path);
	unlink(path);
	snprintf(path, sizeof path, "%s/cgroup.procs", g.path);
	unlink(path);
	snprintf(path, sizeof path, "%s/cgroup.procs", runc);
	unlink(path);
	check(cpugroup_sweep(dir) == 0, "cpugroup: a young group is no stray");
	struct cpugroup found;
	check(cpugroup_find(&found, dir, "sage-sandbox-0123456789abcdef") == 0 &&
		strcmp(found.path, g.path) == 0,
		"cpugroup: a stray's group is found by its container's name (cleanup)");
	check(cpugroup_find(&found, dir, "sage-sandbox-fedcba9876543210") < 0 && errno == ENOENT &&
		found.path[0] == '\0', "cpugroup: ... none where its container had none");
	check(cpugroup_find(&found, dir, "..") < 0 && cpugroup_find(&found, dir, "a/b") < 0 &&
		cpugroup_find(&found, dir, "") < 0 && errno == EINVAL,
		"cpugroup: ... and never by a name that would leave the delegated directory");
	cpugroup_remove(&g);
	check(g.path[0] == '\0' && rmdir(dir) == 0,
		"cpugroup: removed, the runtime's group in it first");
	check(cpugroup_hold(&g, 500, 0) == 0 && cpugroup_outside(&g, geteuid()) == 0,
		"cpugroup: a sandbox without a group holds nothing, and has nothing outside it");
	check(cpugroup_create(&g, "/nonexistent-dir", "x") < 0 && g.path[0] == '\0',
		"cpugroup: a group that cannot be made is none");
	check(cpugroup_cpu_mount("30 25 0:26 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup "
		"cgroup rw,cpu\n", &m) && strcmp(m.point, "/sys/fs/cgroup/cpu") == 0 &&
		strcmp(m.root, "/") == 0, "cpugroup: the cpu hierarchy mounted alone");
	static const char in_group[] = "9:name=systemd:/\n4:memory:/process_api/7\n"
		"2:cpuacct:/\n1:cpu:/sage-sandbox-1000/sage-sandbox-ab/0123\n0::/\n";
	check(cpugroup_names_group(in_group, &m, "/sys/fs/cgroup/cpu/sage-sandbox-1000/sage-sandbox-ab"),
		"cpugroup: /proc/PID/cgroup: in the runtime's group below the container's");
	check(!cpugroup_names_group("1:cpu:/sage-sandbox-1000/sage-sandbox-abc/0123\n", &m,
		"/sys/fs/cgroup/cpu/sage-sandbox-1000/sage-sandbox-ab"),
		"cpugroup: ... not in a group whose name only begins with the container's");
	check(!cpugroup_names_group("2:cpuacct:/sage-sandbox-1000/sage-sandbox-ab\n1:cpu:/\n", &m,
		"/sys/fs/cgroup/cpu/sage-sandbox-1000/sage-sandbox-ab") &&
		!cpugroup_names_group("0::/\n", &m, "/sys/fs/cgroup/cpu/sage-sandbox-1000/sage-sandbox-ab"),
		"cpugroup: ... not where only cpuacct's line names it, nor without a cpu line");
	check(cpugroup_cpu_mount("31 25 0:27 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup "
		"rw,cpuacct,cpu\n", &m) && strcmp(m.point, "/sys/fs/cgroup/cpu,cpuacct") == 0,
		"cpugroup: ... mounted with cpuacct, in either order");
	check(cpugroup_names_group("3:cpuacct,cpu:/sage-sandbox-1000/sage-sandbox-ab\n", &m,
		"/sys/fs/cgroup/cpu,cpuacct/sage-sandbox-1000/sage-sandbox-ab"),
		"cpugroup: ... in the container's own, cpu mounted with cpuacct");
	/* In a container that sees part of the hierarchy (Docker's, cgroup
	 * namespace the host's): the mount shows /docker/ID. */
	check(cpugroup_cpu_mount("40 35 0:30 /docker/d0 /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\n",
		&m) && strcmp(m.root, "/docker/d0") == 0 &&
		cpugroup_names_group("5:cpu:/docker/d0/sage-sandbox-1000/sage-sandbox-ab/0123\n", &m,
		"/sys/fs/cgroup/cpu/sage-sandbox-1000/sage-sandbox-ab") &&
		!cpugroup_names_group("5:cpu:/sage-sandbox-1000/sage-sandbox-ab\n", &m,
		"/sys/fs/cgroup/cpu/sage-sandbox-1000/sage-sandbox-ab"),
		"cpugroup: ... below a mount whose root is a group of its own");
	check(!cpugroup_cpu_mount("32 25 0:28 / /sys/fs/cgroup/cpuset rw - cgroup cgroup "
		"rw,cpuset\n", &m) &&
		!cpugroup_cpu_mount("33 25 0:29 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", &m),
		"cpugroup: cpuset and cgroup v2 are not it");
}

/* uidclaim.c on a mapping of two uids for sandboxes (10000 and 10001), on
 * host uids of this test's own (far above any account's, and its pid in
 * them: two runs of the test at once claim apart): two live claims never
 * share a uid; a third draw, all being claimed, gets one unclaimed; a uid
 * let go is drawn again. */
static void test_uid_claim(void)
{
	struct podman_host host = {.id_count = SANDBOX_UID_MIN + 2, .uid_ranges = 1,
		.uid_map = {{.container = 1, .host = 3000000000UL + (unsigned long)getpid() * 65536,
			.size = SANDBOX_UID_MIN + 1}}};
	struct uid_claim a = UID_CLAIM_NONE, b = UID_CLAIM_NONE, c = UID_CLAIM_NONE;
	unsigned long ua = uid_claim_draw(&a, &host), ub = 0;
	/* 16 draws of b can all land on a's uid (once in 65536): drawn again. */
	for (int i = 0; i < 8 && b.fd < 0; i++)
		ub = uid_claim_draw(&b, &host);
	check(a.fd >= 0 && b.fd >= 0 && ua != ub && ua >= SANDBOX_UID_MIN && ub >= SANDBOX_UID_MIN &&
		ua <= SANDBOX_UID_MIN + 1 && ub <= SANDBOX_UID_MIN + 1,
		"uidclaim: two live claims, two uids");
	check(uid_claim_host_uid(&a) == host_uid_of(&host, ua) && uid_claim_host_uid(&a) >= 0,
		"uidclaim: a claim holds its uid's host uid");
	unsigned long uc = uid_claim_draw(&c, &host);
	check(c.fd < 0 && (uc == ua || uc == ub), "uidclaim: all claimed: a uid, unclaimed");
	check(uid_claim_host_uid(&c) == -1, "uidclaim: an unclaimed uid holds no host uid");
	uid_claim_release(&a);
	check(a.fd == -1 && uid_claim_host_uid(&a) == -1, "uidclaim: released");
	unsigned long again = 0;
	for (int i = 0; i < 8 && again != ua; i++) {
		uid_claim_release(&c);
		again = uid_claim_draw(&c, &host);
	}
	check(again == ua && c.fd >= 0, "uidclaim: a uid let go is drawn and claimed again");
	uid_claim_release(&b);
	uid_claim_release(&c);
	struct podman_host small = {.id_count = 65536 / 8};
	check(uid_claim_draw(&c, &small) == 1000 && c.fd < 0,
		"uidclaim: a small mapping: the shared uid 1000, unclaimed");
}

/* describe_stop's words for a session's cell at its timeout: never begun
 * (no B frame), interrupted, ended as it came; and a timeout the throttle held back for a
 * quarter of the code's looks names --cpus. */
static void test_describe_stop(void)
{
	struct config cfg;
	char why[256], said[512];
	config_init(&cfg, (const char *[SETTING_COUNT]){0}, false, why, sizeof why);
	struct run_result r = {.after = AFTER_KEPT, .cell_interrupted = true, .timed_out = true};
	check(describe_stop(&r, &cfg, NULL, said, sizeof said) &&
		strstr(said, "before the code began") && strstr(said, "nothing was run") &&
		!strstr(said, "KeyboardInterrupt"),
		"describe_stop: a session's cell whose time was up before it began ran nothing");
	r.code_begun = true;
	check(describe_stop(&r, &cfg, NULL, said, sizeof said) &&
		strncmp(said, "interrupted (KeyboardInterrupt) at its timeout", 46) == 0,
		"describe_stop: ... and one that began was interrupted");
	r.cell_interrupted = false;
	check(describe_stop(&r, &cfg, NULL, said, sizeof said) &&
		strstr(said, "ended as its timeout came") && strstr(said, "state is kept") &&
		!strstr(said, "container was stopped"),
		"describe_stop: ... and one that ended as its timeout came, uninterrupted, kept");
	r = (struct run_result){.timed_out = true, .code_begun = true, .looks = 8,
		.throttled_looks = 2};
	check(describe_stop(&r, &cfg, NULL, said, sizeof said) && strstr(said, "held back to --cpus"),
		"describe_stop: held back for a quarter of the code's looks: --cpus named");
	r.throttled_looks = 1;
	check(describe_stop(&r, &cfg, NULL, said, sizeof said) && !strstr(said, "held back"),
		"describe_stop: ... for less, not");
	/* A broke sandbox: SIGKILLed from outside, or at its life limit. */
	r = (struct run_result){.sandbox_broke = true, .signal = SIGKILL, .exit_code = 137};
	check(describe_stop(&r, &cfg, NULL, said, sizeof said) &&
		strstr(said, "killed from outside") && !strstr(said, "life limit"),
		"describe_stop: a sandbox SIGKILLed under the code: killed from outside");
	r.life_over = true;
	check(describe_stop(&r, &cfg, NULL, said, sizeof said) &&
		strncmp(said, "the container reached its life limit of 24 hours", 48) == 0 &&
		!strstr(said, "from outside"),
		"describe_stop: ... at its container's life limit: said so, not \"from outside\"");
	/* batch's knob, the longest: its fix whole, --cpus at the end. */
	r = (struct run_result){.after = AFTER_NEXT, .timed_out = true, .code_begun = true,
		.looks = 8, .throttled_looks = 8};
	const struct timeout_knob batch = {"the job's timeout (at most the batch's --timeout) "
		"or the batch's --timeout", 600};
	check(describe_stop(&r, &cfg, &batch, said, sizeof said) &&
		strstr(said, "or the batch's --timeout (at most 600) or --cpus"),
		"describe_stop: batch's knob, held back: the whole fix, --cpus named");
	/* A session's cell held back until its timeout: interrupted, or ended
	 * as it came, kept; or lost with its session. */
	r = (struct run_result){.after = AFTER_KEPT, .cell_interrupted = true, .timed_out = true,
		.code_begun = true, .looks = 8, .throttled_looks = 8};
	check(describe_stop(&r, &cfg, NULL, said, sizeof said) &&
		strstr(said, "at its timeout of 60 s, held back to --cpus 1 by the CPU throttle;") &&
		strstr(said, "or --cpus"),
		"describe_stop: a session's cell held back and interrupted names --cpus");
	r.cell_interrupted = false;
	check(describe_stop(&r, &cfg, NULL, said, sizeof said) &&
		strstr(said, "held back to --cpus 1") && strstr(said, "ended as its timeout came"),
		"describe_stop: ... and one that ended as it came");
	r.after = AFTER_LOST;
	check(describe_stop(&r, &cfg, NULL, said, sizeof said) &&
		strstr(said, "held back to --cpus 1") && strstr(said, "state is lost"),
		"describe_stop: ... and one lost with its session");
}

/* The hints that name a podman: pasteable however its path is spelled;
 * a file this user may not run is told chmod +x, not to install podman. */
static void test_podman_hints(void)
{
	char hint[512], dir[] = "/tmp/unit-podman-XXXXXX", path[64], *found;
	struct error err = {0};
	podman_silent_hint(hint, sizeof hint, "/usr/bin/podman", "localhost/sage:10");
	check(strcmp(hint, "run '/usr/bin/podman run --rm --pull=never localhost/sage:10 true' as "
		"this user "
		"to see why") == 0, "silent hint: plain words as they are");
	podman_silent_hint(hint, sizeof hint, "/opt/my podman/it's", "img");
	check(strcmp(hint, "to see why, run as this user: '/opt/my podman/it'\\''s' run --rm "
		"--pull=never img true") == 0, "silent hint: a space and a quote quoted for the shell, the rest as is");
	podman_silent_hint(hint, sizeof hint, "/opt/a=b/podman", "img");
	check(strcmp(hint, "to see why, run as this user: '/opt/a=b/podman' run --rm --pull=never img "
		"true") == 0,
		"silent hint: a path with '=', a shell assignment as a first word, is quoted");
	char long_path[600];
	memset(long_path, 'p', sizeof long_path - 1);
	long_path[0] = '/';
	long_path[sizeof long_path - 1] = '\0';
	podman_silent_hint(hint, sizeof hint, long_path, "img");
	check(strstr(hint, "PODMAN run --rm --pull=never IMAGE true (PODMAN and IMAGE being the "
		"--podman and "
		"--image in use)") && !strstr(hint, "ppp"),
		"silent hint: a path too long to show is named in words, not cut");
	check(mkdtemp(dir) != NULL, "podman hints: a scratch directory");
	snprintf(path, sizeof path, "%s/podman", dir);
	close(open(path, O_WRONLY | O_CREAT, 0644));
	found = podman_executable(path, &err);
	check(!found && err.status == EXIT_REFUSED && strstr(err.hint, "chmod +x") &&
		strstr(err.message, "cannot execute podman"),
		"podman_executable: a file without execute bits is told chmod +x");
	unlink(path);
	found = podman_executable(path, &err);
	check(!found && strstr(err.hint, "install podman") && strstr(err.message, "not found"),
		"podman_executable: a missing one is told to install podman");
	/* Attack helper 162: each was told to install podman. */
	found = podman_executable(dir, &err);
	check(!found && strstr(err.hint, "is a directory") && strstr(err.message, "cannot execute"),
		"podman_executable: a directory is said to be one");
	int fd = open(path, O_WRONLY | O_CREAT, 0755);
	check(fd >= 0 && write(fd, "#!/nonexistent/sh\n", 18) == 18, "podman hints: a script");
	close(fd);
	check(strstr(podman_exec_hint(path, ENOENT), "#! interpreter"),
		"podman_exec_hint: a file there that exec calls missing: its interpreter named");
	unlink(path);
	check(strstr(podman_exec_hint(path, ENOENT), "install podman") != NULL,
		"podman_exec_hint: ... and a file not there: install podman");
	fd = open(path, O_WRONLY | O_CREAT, 0755);
	check(fd >= 0 && write(fd, "\x7f" "ELF\x02", 5) == 5, "podman hints: a truncated ELF");
	close(fd);
	check(strstr(podman_exec_hint(path, ENOEXEC), "no program this machine runs") != NULL,
		"podman_exec_hint: exec's ENOEXEC: not a program, not install podman");
	unlink(path);
	check(mkfifo(path, 0755) == 0 && strstr(podman_exec_hint(path, EACCES), "not a regular file"),
		"podman_exec_hint: a FIFO is not a regular file");
	unlink(path);
	podman_start_error(&err, "/usr/bin/podman", EAGAIN);
	check(strstr(err.message, "cannot start podman /usr/bin/podman") &&
		      strstr(err.hint, "short of processes"),
		"podman_start_error: a fork that failed (EAGAIN) is no exec's failure");
	podman_start_error(&err, path, ENOENT);
	check(strstr(err.message, "cannot execute podman") && strstr(err.hint, "install podman"),
		"podman_start_error: exec's ENOENT is told with podman_exec_hint");
	podman_works_hint(hint, sizeof hint, "/opt/my podman", "ps", NULL);
	check(strcmp(hint, "check that podman works for this user: '/opt/my podman' ps") == 0,
		"works hint: the podman in use, quoted");
	podman_works_hint(hint, sizeof hint, "podman", "image inspect", "a b");
	check(strcmp(hint, "check that podman works for this user: podman image inspect 'a b'") == 0,
		"works hint: ... and its operand");
	podman_works_hint(hint, sizeof hint, long_path, "info", NULL);
	check(strcmp(hint, "check that podman works for this user: PODMAN info (PODMAN being the "
		"--podman in use)") == 0, "works hint: a podman too long to show, in words");
	rmdir(dir);
}

int main(void)
{
	check_string("plain", 5, "\"plain\"", "plain ASCII is copied");
	check_string("a\"b\\c", 5, "\"a\\\"b\\\\c\"", "quote and backslash are escaped");
	check_string("\n\t\r\b\f", 5, "\"\\n\\t\\r\\b\\f\"", "short escapes");
	check_string("\x01\x1f\x7f", 3, "\"\\u0001\\u001f\\u007f\"", "other control bytes as \\u00XX");
	check_string("a\0b", 3, "\"a\\u0000b\"", "NUL inside a string is escaped");
	check_string("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", 9, "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
		"valid 2, 3 and 4 byte UTF-8 is kept");
	check_string("\xff", 1, "\"\xef\xbf\xbd\"", "an invalid byte becomes U+FFFD");
	check_string("\xc0\xaf", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\"", "an overlong form is replaced");
	check_string("\xed\xa0\x80", 3, "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"",
		"a UTF-16 surrogate is replaced");
	check_string("\xf4\x90\x80\x80", 4,
		"\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"", "past U+10FFFF is replaced");
	check_string("\xe2\x82", 2, "\"\xef\xbf\xbd\xef\xbf\xbd\"", "a truncated sequence is replaced");
	check_string("a\xe2\x80\xa8" "b\xe2\x80\xa9", 8, "\"a\\u2028b\\u2029\"",
		"U+2028 and U+2029 are escaped: JavaScript ends lines at them");
	check_string("\xe2\x80\xa7\xe2\x80\xaa", 6, "\"\xe2\x80\xa7\xe2\x80\xaa\"",
		"U+2027 and U+202A, their neighbours, are kept");
	test_separators();

	char *text = NULL;
	size_t size = 0;
	FILE *f = open_memstream(&text, &size);
	struct json j = {.out = f};
	jw_begin_object(&j);
	jw_key(&j, "a");
	jw_integer(&j, -5);
	jw_key(&j, "b");
	jw_begin_array(&j);
	jw_bool(&j, true);
	jw_null(&j);
	jw_decimal(&j, 1500);
	jw_decimal(&j, 100);
	jw_decimal(&j, 4000);
	jw_decimal(&j, 1234);
	jw_end_array(&j);
	jw_key(&j, "c");
	jw_cstring(&j, NULL);
	jw_end_object(&j);
	fclose(f);
	check(strcmp(text, "{\"a\":-5,\"b\":[true,null,1.5,0.1,4,1.234],\"c\":null}\n") == 0,
		"objects, arrays, commas and decimals");
	free(text);

	long n;
	check(accepts(SET_TIMEOUT, "1", &n) && n == 1, "timeout 1 is accepted");
	check(accepts(SET_TIMEOUT, "600", &n) && n == 600, "timeout 600 is accepted");
	check(!accepts(SET_TIMEOUT, "0", NULL) && !accepts(SET_TIMEOUT, "601", NULL),
		"timeout 0 and 601 are refused");
	check(!accepts(SET_TIMEOUT, "", NULL) && !accepts(SET_TIMEOUT, "+5", NULL) &&
		      !accepts(SET_TIMEOUT, "5s", NULL) && !accepts(SET_TIMEOUT, "99999999999999", NULL),
		"timeout: empty, signed, suffixed, huge are refused");
	check(accepts(SET_CPUS, "0.1", &n) && n == 100, "cpus 0.1 is 100 thousandths");
	check(accepts(SET_CPUS, "4", &n) && n == 4000, "cpus 4");
	check(accepts(SET_CPUS, "2.125", &n) && n == 2125, "cpus 2.125");
	check(accepts(SET_CPUS, ".5", &n) && n == 500 && accepts(SET_CPUS, "1.", &n) && n == 1000,
		"cpus: .5 and 1. as podman takes them");
	check(!accepts(SET_CPUS, "0.0999", NULL) && !accepts(SET_CPUS, ".", NULL) &&
		      !accepts(SET_CPUS, "nan", NULL) && !accepts(SET_CPUS, "-1", NULL) &&
		      !accepts(SET_CPUS, "4.001", NULL) && !accepts(SET_CPUS, "1,5", NULL),
		"cpus: too many places, bare dot, nan, negative, over 4, comma are refused");
	check(accepts(SET_MEMORY, "256m", &n) && n == 256l << 20 && accepts(SET_MEMORY, "8g", &n) &&
		      n == 8l << 30, "memory: 256m and 8g, the ends of the range");
	check(accepts(SET_MEMORY, "1G", &n) && n == 1l << 30 && accepts(SET_MEMORY, "1024M", &n) &&
		      n == 1l << 30 && accepts(SET_MEMORY, "1.5g", &n) && n == 3l << 29 &&
		      accepts(SET_MEMORY, "768MiB", &n) && n == 768l << 20 &&
		      accepts(SET_MEMORY, "1gb", &n) && n == 1l << 30 &&
		      accepts(SET_MEMORY, "268435456", &n) && n == 256l << 20 &&
		      accepts(SET_MEMORY, "262144k", &n) && n == 256l << 20 &&
		      accepts(SET_MEMORY, ".5g", &n) && n == 512l << 20,
		"memory: sizes as podman writes them, any case, fractions");
	check(!accepts(SET_MEMORY, "255m", NULL) && !accepts(SET_MEMORY, "8193m", NULL) &&
		      !accepts(SET_MEMORY, "1ib", NULL) && !accepts(SET_MEMORY, "1t", NULL) &&
		      !accepts(SET_MEMORY, "g", NULL) && !accepts(SET_MEMORY, "1 g", NULL) &&
		      !accepts(SET_MEMORY, "1.0000001g", NULL) && !accepts(SET_MEMORY, "99999999999999g", NULL) &&
		      !accepts(SET_MEMORY, "", NULL) && !accepts(SET_MEMORY, "-1g", NULL),
		"memory: out of range, bad units, spaces, too fine, huge, empty, negative refused");
	char written[32];
	size_text(3l << 29, written, sizeof written);
	check(strcmp(written, "1536m") == 0, "1.5g is written 1536m");
	size_text(1l << 30, written, sizeof written);
	check(strcmp(written, "1g") == 0, "1024m is written 1g");
	check(accepts(SET_IMAGE, "docker.io/sagemath/sagemath:latest", NULL) &&
		      !accepts(SET_IMAGE, "-it", NULL) && !accepts(SET_IMAGE, "a\nb", NULL) &&
		      !accepts(SET_IMAGE, "a\x7f", NULL) && !accepts(SET_IMAGE, "", NULL),
		"image: leading dash, control characters, empty are refused");

	/* self-test's verdict: a property passes only by being reported. */
	const char *const *names = self_test_required;
	size_t name_count = self_test_required_count;
	struct buffer report = {0};
	struct self_test t;
	buffer_append(&report, "(x - 1) * (x + 1) * (x^2 + 1)\n", 30);
	for (size_t i = 0; i < name_count; i++) {
		char line[128];
		int len = snprintf(line, sizeof line, "CHECK\t%s\t%s\tdetail\n",
			i + 2 < name_count ? "PASS" : "SKIP", names[i]);
		buffer_append(&report, line, (size_t)len);
	}
	self_test_parse(report.data, 0, &t);
	check(!t.failed && t.count == 2 + (int)name_count,
		"self-test: every check reported PASS or SKIP passes");
	{
		/* More checks than self-test can show: the ones past the last
		 * place are not passes. */
		struct buffer crowded = {0};
		buffer_append(&crowded, report.data, report.len);
		for (int i = 0; i < MAX_CHECKS; i++) {
			char line[64];
			int len = snprintf(line, sizeof line, "CHECK\tPASS\textra_%c%c\tdetail\n",
				'a' + i / 26, 'a' + i % 26);
			buffer_append(&crowded, line, (size_t)len);
		}
		self_test_parse(crowded.data, 0, &t);
		check(t.failed && t.count == MAX_CHECKS,
			"self-test: a check with no room to be shown fails the self-test");
		buffer_free(&crowded);
	}
	self_test_parse(report.data, 137, &t);
	check(t.failed, "self-test: a non-zero exit fails");
	char *cut = strstr(report.data, "CHECK\tPASS\tnetwork");
	*cut = '\0';
	self_test_parse(report.data, 0, &t);
	check(t.failed && strcmp(t.checks[t.count - 1].outcome, "FAIL") == 0,
		"self-test: a check that never reported fails");
	self_test_parse("(x - 1) * (x + 1)\n", 0, &t);
	check(t.failed && strcmp(t.checks[0].outcome, "FAIL") == 0,
		"self-test: a wrong factorisation fails");
	self_test_parse("(x - 1) * (x + 1) * (x^2 + 1)\nCHECK\tPASS\tuser\tx\nCHECK\tFAIL\tuser\ty\n", 0, &t);
	check(strcmp(t.checks[2].outcome, "PASS") == 0 && t.failed,
		"self-test: a repeated name counts once, the rest still required");
	buffer_free(&report);

	/* The code every front end hands to a sandbox. */
	struct error err;
	check(sandbox_check_code("print(1)\n", 9, "x", &err) == 0, "code: plain ASCII passes");
	check(sandbox_check_code("\xc3\xa9", 2, "x", &err) == 0, "code: UTF-8 passes");
	check(sandbox_check_code("ab\xff", 3, "f.sage", &err) < 0 &&
		      strcmp(err.message, "code from f.sage is not UTF-8: invalid byte at offset 2") == 0,
		"code: invalid UTF-8 is refused with its offset");
	check(sandbox_check_code("a\0b", 3, "x", &err) < 0 && strstr(err.message, "NUL byte at offset 1"),
		"code: a NUL byte is refused with its offset");
	char *big = calloc(1, MAX_CODE_BYTES + 1);
	memset(big, '#', MAX_CODE_BYTES + 1);
	check(sandbox_check_code(big, MAX_CODE_BYTES, "x", &err) == 0 &&
		      sandbox_check_code(big, MAX_CODE_BYTES + 1, "x", &err) < 0 &&
		      err.status == EXIT_REFUSED,
		"code: 50000 bytes pass, 50001 are refused (status 125)");
	free(big);

	/* What podman info prints. */
	struct podman_host host;
	podman_info_parse("true\nv2\n[cpuset cpu io memory pids]\ncrun\noverlay\nfalse\n", 0, false,
		NULL, &host);
	check(host.rootless == ROOTLESS_TRUE && !host.remote && strcmp(host.cgroups, "v2") == 0 &&
		      host.controller[CONTROLLER_MEMORY] && host.controller[CONTROLLER_CPU] &&
		      host.controller[CONTROLLER_PIDS] && strcmp(host.runtime, "crun") == 0 &&
		      strcmp(host.storage_driver, "overlay") == 0,
		"podman info: rootless, cgroups, controllers, runtime, storage");
	check(host.id_count == 0 && sandbox_uid_max(&host) < SANDBOX_UID_MIN,
		"podman info: no mapping given, no uid range of its own");
	podman_info_parse("true\nv1\n[]\nrunc\noverlay\nfalse\n0:1001:1 1:100000:65536 \n"
			  "0:1001:1 1:100000:65536 \n", 0, false, NULL, &host);
	check(host.id_count == 65537 && sandbox_uid_max(&host) == SANDBOX_UID_MAX,
		"podman info: a 65536-id mapping holds the whole sandbox uid range");
	check(host_uid_of(&host, 0) == 1001 && host_uid_of(&host, 12345) == 112344 &&
		      host_uid_of(&host, 65537) == -1,
		"podman info: container uids map to host uids as podman maps them");
	podman_info_parse("true\nv1\n[]\nrunc\noverlay\nfalse\n0:1001:1 1:100000:65536 \n"
			  "0:1001:1 1:100000:20000 \n", 0, false, NULL, &host);
	check(host.id_count == 20001 && sandbox_uid_max(&host) == 20000,
		"podman info: the smaller of the uid and gid mappings bounds the range");
	podman_info_parse("true\nv1\n[]\nrunc\nvfs\ntrue\n", 0, false, NULL, &host);
	check(host.remote && !host.controller[CONTROLLER_MEMORY], "podman info: a remote service is seen");
	podman_info_parse("false\nv1\n[]\nrunc\noverlay\nfalse\n", 0, false, NULL, &host);
	check(host.rootless == ROOTLESS_FALSE && rootless_verdict(&host, "podman", &err) < 0 &&
		      strstr(err.message, "not rootless"), "podman info: rootful is refused");
	check(rootless_verdict(&host, "/opt/my podman", &err) < 0 &&
		      strstr(err.hint, "check with: '/opt/my podman' info --format "
				       "'{{.Host.Security.Rootless}}'"),
		"podman info: rootful is refused with the check of the podman in use, quoted");
	podman_info_parse("", 125, false, "WARN[0000] a warning\nError: cannot connect\n", &host);
	check(host.rootless == ROOTLESS_UNKNOWN &&
		      strcmp(host.detail, "podman info exited with status 125: Error: cannot connect") == 0 &&
		      rootless_verdict(&host, "podman", &err) < 0,
		"podman info: a failure is unknown, with podman's last line (its error), and refused");
	podman_info_parse("maybe\n", 0, false, NULL, &host);
	check(host.rootless == ROOTLESS_UNKNOWN, "podman info: an answer that is not true or false is unknown");
	check(podman_said_no_image("Error: localhost/x:1: image not known\n") &&
		      !podman_said_no_image("Error: crun: cgroups in hybrid mode not supported"),
		"podman run: a missing image is told apart from other failures");
	/* Both seen here with 8 concurrent runs under podman 4.3.1. */
	check(podman_said_start_race("Error: failed to connect to container's attach socket: "
			      "/home/u/.local/share/containers/storage/overlay-containers/6c7c/userdata/"
			      "attach: no such file or directory\n") &&
		      podman_said_start_race("Error: OCI runtime error: runc: cannot start a "
			      "container that has stopped\n") &&
		      podman_said_start_race("Error: `/usr/bin/runc start 63dec1423` failed: exit "
			      "status 1\n") &&
		      podman_said_start_race("time=\"x\" level=error msg=\"container process is "
			      "already dead\"\nError: `/usr/bin/crun start 63de` failed: exit status 1\n") &&
		      podman_said_start_race("Error: OCI runtime error: runc: runc create failed: "
			      "unable to start container process: waiting for init preliminary setup: "
			      "read init-p: connection reset by peer\n") &&
		      !podman_said_start_race("Error: OCI runtime error: runc: runc create failed: "
			      "unable to start container process: exec: \"/x\": permission denied\n") &&
		      !podman_said_start_race("Error: `/usr/bin/runc create --bundle b 63de` failed: "
			      "exit status 1\n") &&
		      !podman_said_start_race("Error: `/usr/bin/runc start` x\n` failed: exit status 1\n") &&
		      !podman_said_start_race("Error: `/usr/bin/runc start 63de` failed: signal: killed\n") &&
		      !podman_said_start_race("Error: `/usr/bin/runc start 63de` failed: exit status 137\n") &&
		      podman_said_start_race("Error: `/opt/a start/runc --root r start 63de` failed: exit "
			      "status 1") &&
		      !podman_said_start_race("Error: localhost/x:1: image not known\n") &&
		      !podman_said_start_race(NULL),
		"podman run: its start races (tried again) are told apart from other failures");

	/* What a terminal is shown of the code's output. */
	static const struct {
		const char *first, *second; /* two chunks */
		bool at_end;
		const char *want, *what;
	} shown[] = {
		{"a\tb\n", "", true, "a\tb\n", "terminal: tab and newline pass"},
		{"\x1b]52;c;aGk=\x07", "", true, "^[]52;c;aGk=^G", "terminal: OSC 52 is shown, not obeyed"},
		{"\x1b[2J\r\x7f\x01", "", true, "^[[2J^M^?^A", "terminal: CSI, CR, DEL, C0 in caret notation"},
		{"\xc2\x9b[2J", "", true, "\\u009b[2J", "terminal: a C1 control as \\u009b"},
		{"\x9b[2J", "", true, "\\x9b[2J", "terminal: a lone 0x9b byte as \\x9b"},
		{"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "", true, "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
			"terminal: printable UTF-8 passes"},
		{"x\xe2\x82", "\xacy", true, "x\xe2\x82\xacy", "terminal: a sequence split between chunks passes"},
		{"x\xe2\x82", "", true, "x\\xe2\\x82", "terminal: a sequence cut at the end is shown as bytes"},
		{"\xe2", "a", true, "\\xe2a", "terminal: a broken sequence across chunks is shown as bytes"},
	};
	for (size_t i = 0; i < sizeof shown / sizeof shown[0]; i++) {
		struct terminal_filter tf = {0};
		struct buffer out = {0};
		terminal_escape(&tf, shown[i].first, strlen(shown[i].first), false, &out);
		terminal_escape(&tf, shown[i].second, strlen(shown[i].second), shown[i].at_end, &out);
		bool same = out.len == strlen(shown[i].want) && memcmp(out.data, shown[i].want, out.len) == 0;
		check(same, shown[i].what);
		if (!same)
			printf("#   want %s\n#   got  %.*s\n", shown[i].want, (int)out.len, out.data);
		buffer_free(&out);
	}

	test_sniff();
	test_image_bound();
	test_base64();
	test_names();
	test_outfiles();
	test_jobs();
	test_settings_file();
	test_cpugroup();
	test_uid_claim();
	test_describe_stop();
	test_podman_hints();

	printf("1..%d\n", test_number);
	return failures ? 1 : 0;
}
