/* The catalog's data files (the CSV files of catalog/data), compiled into the
 * binary by catalog/embed.cmake. */
#ifndef CCLFS_CATALOG_DATA_H
#define CCLFS_CATALOG_DATA_H

#include <stddef.h>

extern const char catalog_data_types[];
extern const size_t catalog_data_types_size;
extern const char catalog_data_offers[];
extern const size_t catalog_data_offers_size;
extern const char catalog_data_regions[];
extern const size_t catalog_data_regions_size;
extern const char catalog_data_platform_types_added[];
extern const size_t catalog_data_platform_types_added_size;
extern const char catalog_data_machine_types_added[];
extern const size_t catalog_data_machine_types_added_size;
extern const char catalog_data_platform_types[];
extern const size_t catalog_data_platform_types_size;
extern const char catalog_data_machine_types[];
extern const size_t catalog_data_machine_types_size;
extern const char catalog_data_platform_aliases[];
extern const size_t catalog_data_platform_aliases_size;
extern const char catalog_data_cclfs_aliases[];
extern const size_t catalog_data_cclfs_aliases_size;
extern const char catalog_data_cclfs_regions[];
extern const size_t catalog_data_cclfs_regions_size;
extern const char catalog_data_cclfs_types[];
extern const size_t catalog_data_cclfs_types_size;

#endif
