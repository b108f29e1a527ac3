/* The building blocks of the report page (report_internal.h): HTML
 * escaping of foreign bytes and the inline SVG charts. Pure functions over
 * a kiln_buf; they know nothing of datasets. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "report/report.h"
#include "report/report_internal.h"

/* The length of the UTF-8 sequence at s[0..n), 0 when it is not one. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3f);
	}
	if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
	    (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
		return 0;
	if ((cp >= 0x7f && cp <= 0x9f) || (cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) == 0xfffe)
		return 0; /* C1 controls and noncharacters: HTML parsers object */
	return len;
}

int kiln_report_escape_n(kiln_buf *b, const char *s, size_t n)
{
	const unsigned char *u = (const unsigned char *)s;
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0;) {
		unsigned char c = u[i];
		size_t len;

		switch (c) {
		case '&':
			rc = kiln_buf_puts(b, "&amp;"), i++;
			continue;
		case '<':
			rc = kiln_buf_puts(b, "&lt;"), i++;
			continue;
		case '>':
			rc = kiln_buf_puts(b, "&gt;"), i++;
			continue;
		case '"':
			rc = kiln_buf_puts(b, "&quot;"), i++;
			continue;
		case '\'':
			rc = kiln_buf_puts(b, "&#39;"), i++;
			continue;
		default:
			break;
		}
		if (c < 0x20 || c == 0x7f) {
			rc = kiln_buf_printf(b, "\\x%02x", c);
			i++;
		} else if ((len = utf8_len(u + i, n - i)) == 0) {
			rc = kiln_buf_puts(b, "\xef\xbf\xbd");
			i++;
		} else {
			rc = kiln_buf_put(b, s + i, len);
			i += len;
		}
	}
	return rc;
}

int kiln_report_escape(kiln_buf *b, const char *s)
{
	return kiln_report_escape_n(b, s ? s : "", s ? strlen(s) : 0);
}

int kiln_report_field_id(kiln_buf *b, const char *path)
{
	int rc = kiln_buf_puts(b, "field-");

	for (const unsigned char *p = (const unsigned char *)path; *p && rc == 0; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
		    *p == '_' || *p == '.' || *p == '-')
			rc = kiln_buf_putc(b, (char)*p);
		else
			rc = kiln_buf_printf(b, "-%02x", *p);
	}
	return rc;
}

/* ---- charts ----------------------------------------------------------------- */

#define W     560 /* chart width */
#define LEFT  8
#define RIGHT 8
#define NAMEW 170 /* bars: the names' column */

static int open_svg(kiln_buf *b, int w, int h, const char *label)
{
	int rc = kiln_buf_printf(b,
	                         "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
	                         "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"",
	                         w, h, w, h);

	rc |= kiln_report_escape(b, label);
	rc |= kiln_buf_puts(b, "\"><title>");
	rc |= kiln_report_escape(b, label);
	return rc | kiln_buf_puts(b, "</title>");
}

static double largest(const double *v, size_t n, double m)
{
	for (size_t i = 0; v && i < n; i++)
		if (isfinite(v[i]) && v[i] > m)
			m = v[i];
	return m;
}

static int put_number(kiln_buf *b, double v)
{
	return kiln_buf_printf(b, "%.4g", isfinite(v) ? v : 0);
}

int kiln_report_svg_hist(kiln_buf *b, const double *now, const double *base, size_t n, double lo, double hi,
                         const char *label)
{
	const int h = 150, top = 8, plot = 112;
	double max = largest(base, n, largest(now, n, 0)), bw;
	int rc;

	if (n == 0)
		return 0;
	bw = (double)(W - LEFT - RIGHT) / (double)n;
	rc = open_svg(b, W, h, label);
	rc |= kiln_buf_printf(b, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>", LEFT,
	                      top + plot, W - RIGHT, top + plot);
	for (size_t i = 0; i < n && max > 0; i++) {
		double y = (now[i] / max) * plot;

		if (now[i] > 0)
			rc |= kiln_buf_printf(
			    b, "<rect class=\"now\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>",
			    LEFT + i * bw + 0.5, top + plot - y, bw > 2 ? bw - 1 : bw, y);
	}
	if (base && max > 0) {
		rc |= kiln_buf_puts(b, "<polyline class=\"base\" points=\"");
		for (size_t i = 0; i < n; i++) {
			double y = top + plot - (base[i] / max) * plot;

			rc |= kiln_buf_printf(b, "%.1f,%.1f %.1f,%.1f ", LEFT + i * bw, y,
			                      LEFT + (i + 1) * bw, y);
		}
		rc |= kiln_buf_puts(b, "\"/>");
	}
	rc |= kiln_buf_printf(b, "<text x=\"%d\" y=\"%d\">", LEFT, h - 8);
	rc |= put_number(b, lo);
	rc |= kiln_buf_printf(b, "</text><text x=\"%d\" y=\"%d\" text-anchor=\"end\">", W - RIGHT, h - 8);
	rc |= put_number(b, hi);
	return rc | kiln_buf_puts(b, "</text></svg>");
}

int kiln_report_svg_bars(kiln_buf *b, const char *const *names, const double *now, const double *base,
                         size_t n, const char *label)
{
	const int row = base ? 26 : 16, span = W - NAMEW - 60;
	double max = largest(base, n, largest(now, n, 0));
	int rc = open_svg(b, W, (int)n * row + 6, label);

	for (size_t i = 0; i < n; i++) {
		int y = (int)i * row + 3;
		double wn = max > 0 ? now[i] / max * span : 0;

		rc |= kiln_buf_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", NAMEW - 6, y + 11);
		rc |= kiln_report_escape(b, names[i]);
		rc |= kiln_buf_printf(
		    b, "</text><rect class=\"now\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"11\"/>", NAMEW,
		    y + 1, wn);
		rc |= kiln_buf_printf(b, "<text x=\"%.1f\" y=\"%d\">%.1f%%</text>", NAMEW + wn + 4, y + 11,
		                      now[i] * 100);
		if (base) {
			double wb = max > 0 ? base[i] / max * span : 0;

			rc |= kiln_buf_printf(
			    b, "<rect class=\"base\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"8\"/>", NAMEW,
			    y + 14, wb);
			rc |= kiln_buf_printf(b, "<text class=\"small\" x=\"%.1f\" y=\"%d\">%.1f%%</text>",
			                      NAMEW + wb + 4, y + 22, base[i] * 100);
		}
	}
	return rc | kiln_buf_puts(b, "</svg>");
}

/* One stacked bar at y: null then missing, of the whole width. */
static int rate_bar(kiln_buf *b, int y, int hgt, double nul, double missing, const char *cls)
{
	const int span = W - NAMEW - 90;
	int rc = kiln_buf_printf(b, "<rect class=\"present\" x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\"/>",
	                         NAMEW, y, span, hgt);

	rc |= kiln_buf_printf(b, "<rect class=\"null %s\" x=\"%d\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>",
	                      cls, NAMEW, y, nul * span, hgt);
	rc |= kiln_buf_printf(b,
	                      "<rect class=\"missing %s\" x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\"/>",
	                      cls, NAMEW + nul * span, y, missing * span, hgt);
	return rc | kiln_buf_printf(b, "<text x=\"%d\" y=\"%d\">%.1f%% / %.1f%%</text>", NAMEW + span + 4,
	                            y + hgt - 1, nul * 100, missing * 100);
}

int kiln_report_svg_rates(kiln_buf *b, double null_now, double missing_now, bool has_base, double null_base,
                          double missing_base, const char *label)
{
	int rc = open_svg(b, W, has_base ? 36 : 20, label);

	rc |= kiln_buf_printf(b, "<text x=\"%d\" y=\"13\" text-anchor=\"end\">null / missing</text>",
	                      NAMEW - 6);
	rc |= rate_bar(b, 3, 12, null_now, missing_now, "v");
	if (has_base) {
		rc |= kiln_buf_printf(
		    b, "<text class=\"small\" x=\"%d\" y=\"30\" text-anchor=\"end\">baseline</text>",
		    NAMEW - 6);
		rc |= rate_bar(b, 20, 10, null_base, missing_base, "b");
	}
	return rc | kiln_buf_puts(b, "</svg>");
}

int kiln_report_svg_columns(kiln_buf *b, const char *const *names, const double *v, size_t n,
                            const char *label)
{
	const int h = 150, top = 14, plot = 100;
	double max = largest(v, n, 0), cw;
	size_t step;
	int rc;

	if (n == 0)
		return 0;
	cw = (double)(W - LEFT - RIGHT) / (double)n;
	if (cw > 60)
		cw = 60;
	step = cw >= 48 ? 1 : (size_t)ceil(48 / cw);
	rc = open_svg(b, W, h, label);
	rc |= kiln_buf_printf(b, "<line class=\"axis\" x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\"/>", LEFT,
	                      top + plot, W - RIGHT, top + plot);
	for (size_t i = 0; i < n; i++) {
		double y = max > 0 ? v[i] / max * plot : 0, x = LEFT + i * cw;

		rc |= kiln_buf_printf(
		    b, "<rect class=\"q\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>", x + 1,
		    top + plot - y, cw > 3 ? cw - 2 : cw, y);
		rc |= kiln_buf_printf(
		    b, "<text class=\"small\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%.0f</text>",
		    x + cw / 2, top + plot - y - 2, v[i]);
		if (i % step && i + 1 != n)
			continue; /* room for every step-th name only */
		rc |= kiln_buf_printf(b, "<text class=\"small\" x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">",
		                      x + cw / 2, top + plot + 14);
		rc |= kiln_report_escape(b, names[i]);
		rc |= kiln_buf_puts(b, "</text>");
	}
	return rc | kiln_buf_puts(b, "</svg>");
}
