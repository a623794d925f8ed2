// viewer script
