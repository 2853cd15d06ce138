/*
 * pb_dl.h - the protobuf-c names profile.proto's code calls, turned into
 * memtop's (memtop side; see libs.h).
 *
 * The generated code (profile.pb-c.c, compiled with this header included
 * first) and pprof.c name protobuf-c's functions and its empty string;
 * linked as they are, they would make every memtop command load the
 * library. Renamed here before protobuf-c.h is read, they are declared by
 * that header under memtop's names with their own types, and libs.c
 * defines them: the functions load the library at their first call and
 * call its own, and the empty string (a string field's default, which
 * protobuf-c compares with the descriptor's, never with its own) is
 * memtop's.
 */
#ifndef MT_PPROF_PB_DL_H
#define MT_PPROF_PB_DL_H

#define protobuf_c_empty_string mt_pb_empty_string
#define protobuf_c_message_get_packed_size mt_pb_message_get_packed_size
#define protobuf_c_message_pack mt_pb_message_pack
#define protobuf_c_message_pack_to_buffer mt_pb_message_pack_to_buffer
#define protobuf_c_message_unpack mt_pb_message_unpack
#define protobuf_c_message_free_unpacked mt_pb_message_free_unpacked

#include <protobuf-c/protobuf-c.h>

#endif
