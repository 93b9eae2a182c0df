"""The secret rules: the one secret detector every write path uses (memory, facts, tools, extraction, run inputs, run
memory, learnings, session titles).

Memory is injected into prompts and exported; a secret stored there leaks. `find_secret` says what
kind of secret a text seems to hold, after the text is normalised the way a leak would be read back:

- Unicode NFKC (full-width `ｓｋ－ａｎｔ` is `sk-ant`), then format characters (zero-width spaces and
  joiners, soft hyphens, bidi controls, BOMs) removed, then look-alike letters folded to the Latin
  letter or digit they imitate (the UTS #39 confusables table, from confusable-homoglyphs): "pаssword"
  with a Cyrillic а reads "password", "АKIA..." reads "AKIA...";
- known key formats: detect-secrets' format plugins used as a library (AWS, GitHub, GitLab, Slack,
  Stripe, JWT, private keys, SendGrid, Twilio, Telegram, Discord, npm, PyPI, ...; not its keyword
  and entropy plugins, which flag sentences), with every repetition bounded; and ours for what it
  lacks or misses: Anthropic and OpenAI-style `sk-` keys whose body looks random (`sk-learn-...` is
  not), Google keys, fine-grained GitHub tokens, keys split by whitespace ("AKIA IOSF ODNN 7EXA MPLE"),
  credentials in a URL (`redis://:pw@host`, `?access_token=`), bare PEM bodies (base64 of a DER
  sequence or an OpenSSH key), Luhn-valid card numbers;
- statements, in English, German, French, Spanish, Italian, Portuguese and Dutch, in either order:
  "the password for the prod db is hunter2", "hunter2 is my password", "Mein Passwort ist
  Sonnenblume77", `SMTP_PASSWORD=mailpw2024`, "my bank PIN, 4417,", "482913 unlocks my phone". A
  password-shaped word (letters with digits or symbols) near a password word, a 4-12 digit number
  near a PIN word, a value after "is"/":"/"=" that is not an ordinary word;
- statements in any of the 90+ languages Django's translators keep a word for "password" in
  (`languages`, `words`): the word, then a password-shaped value in its sentence; passphrases
  written as a sentence; a card's CVV;
- a key spelled with a space between its characters is joined and read again;
- base64 and hex runs that decode to text are judged by that text;
- generic tokens: 20+ characters of the base64/URL-safe alphabet with upper case, lower case and a
  digit, and a Shannon entropy (bits per character) of at least 0.8 * log2(min(length, 64)), which
  random keys reach, and words shorter than 3 characters on average, which identifiers
  (`AbstractProxyFactoryBean2`) are not; runs of words two thirds of which look random are joined
  first: a key split by spaces.

Deliberately not flagged (documented in docs/ARCHITECTURE.md): pure hex (git SHAs, checksums), UUIDs,
our own ids (`run_01k...`), URLs without credentials, dates, prices, hex colours, digests named
by their algorithm (`SHA256:...` SSH fingerprints, `sha512-...` npm integrity), postal PIN codes - they are ids or
data far more often than keys; a hex key is still caught after a keyword ("secret: 9f86d0...").

Every repetition in a pattern is bounded (a test checks ours and the library's, which are rewritten
with bounds when they are compiled) and every loop visits each character a bounded number of times,
so a scan is linear in the text's length. Callers check sizes first. The patterns, the library's
rules and the confusables table are built on the first check, not on import.

The package: `text` (normalising, what the rules share), `formats` (known key formats, cards, PEM
bodies), `statements` (keywords and what follows them, assignments), `languages` (other languages'
password words from `words`, passphrases), `tokens` (high-entropy tokens, encoded runs), `matcher`
(the functions the kernel calls: `engram.kernel.secrets`, `redact` among them). It
imports nothing of Engram.
"""
