/* An XLA FFI handler written against the C API alone (xla/ffi/api/c_api.h's layout, declared
   here): y = 2 * x for float32 buffers. It answers XLA's metadata query with the API version
   of the runtime calling it, so any runtime of FFI API 0.x takes it (kiln's, and the older
   XLA inside the xla-cpu-pjrt plug-in). */
#include <stddef.h>
#include <stdint.h>

typedef struct { size_t struct_size; int type; void* next; } ExtensionBase;
typedef struct { size_t struct_size; void* extension_start; int major, minor; } ApiVersion;
typedef struct { size_t struct_size; ApiVersion api_version; uint32_t traits;
                 int64_t state_type_id; } Metadata;
typedef struct { ExtensionBase base; Metadata* metadata; } MetadataExtension;
typedef struct { size_t struct_size; void* extension_start; ApiVersion api_version;
                 void* internal_api; void* error_create; } Api;
typedef struct { size_t struct_size; void* extension_start; int dtype; void* data;
                 int64_t rank; int64_t* dims; } Buffer;
typedef struct { size_t struct_size; void* extension_start; int64_t size; int* types;
                 void** items; } List;
typedef struct { size_t struct_size; void* extension_start; const char* message; int errc; }
    ErrorCreateArgs;
typedef struct { size_t struct_size; ExtensionBase* extension_start; const Api* api; void* ctx;
                 int stage; List args; List rets; List attrs; void* future; } CallFrame;

static void* error(const Api* api, const char* message) {
  ErrorCreateArgs args = {sizeof(ErrorCreateArgs), 0, message, 3};
  return ((void* (*)(ErrorCreateArgs*))api->error_create)(&args);
}

void* ScaleByTwo(CallFrame* frame) {
  if (frame->extension_start && frame->extension_start->type == 1) {
    Metadata* md = ((MetadataExtension*)frame->extension_start)->metadata;
    md->api_version.major = frame->api->api_version.major;
    md->api_version.minor = frame->api->api_version.minor;
    md->traits = 0;
    return 0;
  }
  if (frame->args.size != 1 || frame->rets.size != 1)
    return error(frame->api, "scale_by_two takes one operand and one result");
  Buffer* x = (Buffer*)frame->args.items[0];
  Buffer* y = (Buffer*)frame->rets.items[0];
  if (x->dtype != 11 || y->dtype != 11) return error(frame->api, "scale_by_two: float32 only");
  int64_t n = 1;
  for (int64_t i = 0; i < x->rank; ++i) n *= x->dims[i];
  for (int64_t i = 0; i < n; ++i) ((float*)y->data)[i] = 2.0f * ((const float*)x->data)[i];
  return 0;
}
