# Shell functions shared by the checkers (check-includes.sh, check-floors.sh),
# read with `. scripts/paths.sh`.

# normalise PATH: PATH with ./ and ../ folded (a/./b/../c -> a/c)
normalise() {
    printf '%s\n' "$1" | awk -F/ '{
        n = 0
        for (i = 1; i <= NF; i++) {
            if ($i == "." || $i == "") continue
            if ($i == ".." && n > 0 && p[n] != "..") { n--; continue }
            p[++n] = $i
        }
        s = p[1]; for (i = 2; i <= n; i++) s = s "/" p[i]; print s
    }'
}
