# extract-corpus.R: dumps Jane Austen's six novels from the Debian package
# r-cran-janeaustenr (MIT licence; the texts are public domain) to
# work/raw/<book>.txt, one source line per line, UTF-8, exactly as the package
# stores them. It must never reflow, clean or split the text: that is
# prepare-corpus.mjs's job, so that the split is defined in one place.
#
# Usage (from the repository root): Rscript tools/train-demo/extract-corpus.R
library(janeaustenr)

out_dir <- file.path("tools", "train-demo", "work", "raw")
dir.create(out_dir, recursive = TRUE, showWarnings = FALSE)

# Publication order; prepare-corpus.mjs numbers chapters in this order.
books <- c("sensesensibility", "prideprejudice", "mansfieldpark",
           "emma", "northangerabbey", "persuasion")
for (book in books) {
  lines <- enc2utf8(get(book, envir = asNamespace("janeaustenr")))
  con <- file(file.path(out_dir, paste0(book, ".txt")), open = "wb")
  writeLines(lines, con, sep = "\n", useBytes = TRUE)
  close(con)
  cat(sprintf("%-18s %6d lines\n", book, length(lines)))
}
cat(sprintf("janeaustenr %s\n", as.character(packageVersion("janeaustenr"))))
