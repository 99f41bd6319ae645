/* A bounded walk over a serialized protobuf message before protobuf-c
 * unpacks it. protobuf-c recurses once per nested message with no limit of
 * its own, and ONNX's messages nest without end (a GraphProto in an
 * AttributeProto in a NodeProto in a GraphProto, a TypeProto in a
 * sequence's TypeProto, ...): a file of a few tens of kilobytes of nested
 * headers would overflow the C stack inside it. This walk reads only tags
 * and lengths, guided by the generated descriptors so that exactly the
 * fields protobuf-c will descend into are descended into here, and its own
 * recursion stops at the limit. It also counts the messages, each of which
 * protobuf-c allocates a struct for: a file of empty messages costs two
 * bytes apiece on disk and a hundred or more in memory. */
#include "onnx_internal.h"

#ifdef CN_HAVE_ONNX

typedef struct wire_walk {
    size_t messages;
} wire_walk;

/* A base-128 varint at p[*i..n); false when truncated or longer than the
 * 10 bytes a 64-bit value takes (protobuf-c refuses both too). */
static bool read_varint(const uint8_t *p, size_t n, size_t *i, uint64_t *v) {
    uint64_t x = 0;
    for (int shift = 0; shift < 70 && *i < n; shift += 7) {
        uint8_t b = p[(*i)++];
        x |= (uint64_t)(b & 0x7f) << (shift < 64 ? shift : 63);
        if (!(b & 0x80)) {
            *v = x;
            return true;
        }
    }
    return false;
}

/* The sub-message type protobuf-c will unpack field number f into, or NULL
 * (a scalar, bytes, a string, or a field the schema does not have, which
 * protobuf-c keeps as opaque unknown bytes). */
static const ProtobufCMessageDescriptor *sub_message(const ProtobufCMessageDescriptor *d, uint64_t f) {
    if (f == 0 || f > 0x1fffffff) return NULL;
    const ProtobufCFieldDescriptor *fd = protobuf_c_message_descriptor_get_field(d, (unsigned)f);
    return fd && fd->type == PROTOBUF_C_TYPE_MESSAGE ? fd->descriptor : NULL;
}

/* One message of type d in p[0..n) at nesting depth (the top message is 1). */
static int walk(const uint8_t *p, size_t n, const ProtobufCMessageDescriptor *d, int depth,
                wire_walk *w) {
    if (depth > ONNX_MAX_DEPTH) return ONNX_WIRE_TOO_DEEP;
    if (++w->messages > ONNX_MAX_MESSAGES) return ONNX_WIRE_TOO_MANY;
    for (size_t i = 0; i < n;) {
        uint64_t key, len;
        if (!read_varint(p, n, &i, &key)) return ONNX_WIRE_MALFORMED;
        switch (key & 7) {
        case 0: /* varint */
            if (!read_varint(p, n, &i, &len)) return ONNX_WIRE_MALFORMED;
            break;
        case 1: /* 64-bit */
            if (n - i < 8) return ONNX_WIRE_MALFORMED;
            i += 8;
            break;
        case 5: /* 32-bit */
            if (n - i < 4) return ONNX_WIRE_MALFORMED;
            i += 4;
            break;
        case 2: { /* length-delimited: bytes, a string, a packed list or a message */
            if (!read_varint(p, n, &i, &len) || len > n - i) return ONNX_WIRE_MALFORMED;
            const ProtobufCMessageDescriptor *sub = sub_message(d, key >> 3);
            if (sub) {
                int rc = walk(p + i, (size_t)len, sub, depth + 1, w);
                if (rc < 0) return rc;
            }
            i += (size_t)len;
            break;
        }
        default: /* groups (3, 4) and the unused 6 and 7: protobuf-c refuses them */
            return ONNX_WIRE_MALFORMED;
        }
    }
    return 0;
}

int onnx_wire_check(const void *data, size_t size, const ProtobufCMessageDescriptor *d) {
    if (size > ONNX_MAX_BYTES) return ONNX_WIRE_TOO_BIG;
    wire_walk w = {0};
    return walk(data, size, d, 1, &w);
}

/* Test data stores a sequence, map or optional value (SequenceProto,
 * MapProto, OptionalProto) in a .pb file like a tensor, and read as a
 * TensorProto its elem_type becomes a data_type (3, a sequence, reads as
 * int8). Those messages open with a name in field 1; a TensorProto's field 1
 * is its dims, unpacked (onnx.proto is proto2), and its own name, data and
 * external location are fields 8 and up, which those messages lack. */
bool onnx_wire_not_tensor(const void *data, size_t size) {
    const uint8_t *p = data;
    bool named = false;
    for (size_t i = 0; i < size;) {
        uint64_t key, v;
        if (!read_varint(p, size, &i, &key)) return false;
        if ((key >> 3) >= 8) return false;
        switch (key & 7) {
        case 0:
            if (!read_varint(p, size, &i, &v)) return false;
            break;
        case 1:
        case 5:
            v = (key & 7) == 1 ? 8 : 4;
            if (v > size - i) return false;
            i += (size_t)v;
            break;
        case 2:
            if (!read_varint(p, size, &i, &v) || v > size - i) return false;
            named |= (key >> 3) == 1;
            i += (size_t)v;
            break;
        default: return false;
        }
    }
    return named;
}

#endif /* CN_HAVE_ONNX */
