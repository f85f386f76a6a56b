# Turn the catalog's CSV files into a C source, so that the binary carries
# its catalog and needs no file at run time.
# Usage: cmake -DOUT=FILE.c -DDATA=catalog/data -P embed.cmake
# Every DATA/*.csv becomes catalog_data_NAME (declared in catalog/data.h).
file(GLOB INPUTS ${DATA}/*.csv)
list(SORT INPUTS)
set(code "/* Generated from catalog/data by catalog/embed.cmake; do not edit. */\n#include \"catalog/data.h\"\n\n")
foreach(input ${INPUTS})
  get_filename_component(name ${input} NAME_WE)
  file(READ ${input} hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(APPEND code "const char catalog_data_${name}[] = {${bytes}0x00};\n")
  string(APPEND code "const size_t catalog_data_${name}_size = sizeof(catalog_data_${name}) - 1;\n\n")
endforeach()
file(WRITE ${OUT} "${code}")
