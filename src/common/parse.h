/*
 * parse.h - strict number parsing for what a user types (memtop side: the
 * command line and the live view's prompts). Only plain decimal notation
 * passes: no blanks, no "0x", no "nan" or "inf", nothing after the number.
 */
#ifndef MS_COMMON_PARSE_H
#define MS_COMMON_PARSE_H

/* Parses s as a decimal number within [min, max] into *out. Returns 0, or
 * MS_EINVAL (NULL, empty, not a plain number, or out of range; *out is then
 * unchanged). */
int ms__parse_double(const char *s, double min, double max, double *out);

/* The same for a whole number (an optional leading '-', then digits). */
int ms__parse_long(const char *s, long min, long max, long *out);

#endif
