"""Tricky texts for the stream segmenter: text -> expected [(kind, text), ...] over the whole message.

Kinds: S sentence, _ space (whitespace and pure markup), H heading, C code, T table.
"""

from __future__ import annotations

S, _, H, C, T = "sentence", "space", "heading", "code", "table"

Case = tuple[str, list[tuple[str, str]]]


def prose(*sentences: str) -> Case:
    """Sentences separated by single spaces: the text and its expected segments."""
    expected: list[tuple[str, str]] = []
    for s in sentences:
        if expected:
            expected.append((_, " "))
        expected.append((S, s))
    return " ".join(sentences), expected


CASES: list[Case] = [
    # ---------------------------------------------------------------- abbreviations
    prose("Dr. Smith arrived.", "He sat down."),
    prose("Mr. and Mrs. Jones live here.", "They are nice."),
    prose("She met Ms. Lee at 5 p.m. on Monday.", "It went well."),
    prose("We met at 5 p.m.", "The talk began."),
    prose("He lives on Main St.", "The house is red."),
    prose("St. Louis is a city in Missouri.", "It is large."),
    prose("The U.S. Army was founded in 1775.", "It grew."),
    prose("She moved to the U.S.", "In 2010 she returned."),
    prose("The U.K. government said no.", "Nothing changed."),
    prose("Fruits, e.g. apples, are healthy.", "Eat them."),
    prose("Use a tool, i.e. a hammer.", "Then nail it."),
    prose("Some fruits, e.g. Apples and Pears, are sweet."),
    prose("Bring pens, paper, etc.", "The store has them."),
    prose("Bring pens, paper, etc. and books."),
    prose("It was Brazil vs. Germany.", "Germany won."),
    prose("He works at Apple Inc.", "The company is big."),
    prose("Acme Ltd. sells tools.", "It is old."),
    prose("Martin Luther King Jr. was a leader.", "He spoke."),
    prose("See No. 5 on the list.", "It is red."),
    prose("No.", "That is wrong."),
    prose("See Fig. 3 for details.", "It shows the data."),
    prose("The proof is on pp. 12-14.", "Read it."),
    prose("He was born on Jan. 5, 1990.", "He grew up fast."),
    prose("It happened in Jan.", "The snow fell."),
    prose("Prof. Brown and Dr. Green met.", "They talked."),
    prose("It costs approx. 5 dollars.", "Buy it."),
    prose("Smith et al. (2020) showed this.", "It was new."),
    prose("This was shown by Smith et al.", "The result held."),
    prose("Contact Acme Corp. for details."),
    prose("He got a Ph.D. in physics.", "Then he left."),
    prose("She has a Ph.D.", "The thesis was long."),
    prose("Washington, D.C. is the capital.", "It is on the Potomac."),
    prose("He lives in Washington, D.C.", "The city is busy."),
    prose("Meet me at 10 a.m. Eastern time.", "Don't be late."),
    prose("Roe v. Wade was decided in 1973.", "It was a landmark."),
    prose("The U.S. President spoke.", "He was brief."),
    prose("The U.S.-based firm grew.", "It hired."),
    prose("Use e.g., this.", "Or that."),
    prose("Sgt. Pepper and Capt. Hook met Gen. Lee.", "Nobody won."),
    prose("He climbed Mt. Everest in 1953.", "It was cold."),
    prose("Art. 5 applies.", "No. 7 applies too."),
    prose("See p. 5 and pp. 12-14.", "Then stop."),
    prose("Vol. 2 is out.", "It sells well."),
    prose("Built c. 1500 by monks.", "It still stands."),
    # ---------------------------------------------------------------- initials
    prose("J. R. R. Tolkien wrote books.", "He was British."),
    prose("John F. Kennedy was president.", "He died in 1963."),
    prose("George W. Bush spoke.", "The crowd cheered."),
    prose("A. A. Milne wrote Winnie-the-Pooh.", "It is famous."),
    prose("Take vitamin C.", "It helps."),
    prose("We chose plan B.", "The plan worked."),
    prose("J.R.R. Tolkien was born in 1892."),
    # ---------------------------------------------------------------- decimals, versions, numbers
    prose("Pi is about 3.14.", "It is irrational."),
    prose("Update to v2.0.1 now.", "It fixes bugs."),
    prose("Python 3.11 is fast.", "Python 3.12 is faster."),
    prose("The value is 0.5.", "The rest is 1.5."),
    prose("It costs $4.99.", "That is cheap."),
    prose("Released in 2021.", "2022 was better."),
    prose("The rate rose 2.5%.", "Prices fell."),
    prose("Use the address 192.168.0.1.", "It is local."),
    prose("See section 3.2.1.", "It explains."),
    prose("It's 5:30.", "Let's go."),
    prose("Price: $5.", "Tax: $1."),
    prose("He scored 9/10.", "Nice."),
    prose("Call 555-1234.", "Ask for Bob."),
    prose("Temperatures hit 40°C.", "It was hot."),
    prose("What is 2+2?", "4. Correct."),  # a sentence is never a bare number
    # ---------------------------------------------------------------- ellipses, ?!
    prose("Wait...", "What happened?"),
    prose("I was thinking... maybe not."),
    prose("Well…", "That is odd."),
    prose("And so on… and so forth."),
    prose("Hmm....", "Okay."),
    prose("Really?!", "I can't believe it!!", "Wow."),
    prose("What??", "No way."),
    prose('"Really?" she asked.', "He nodded."),
    prose("Yahoo! is a company.", "It is old."),
    prose("Is it true?", "Yes."),
    # ---------------------------------------------------------------- quotes, brackets, emphasis
    prose('"He left."', "She stayed."),
    prose("(See above.)", "Next."),
    prose("He said, 'Go home.'", "Then he left."),
    prose("“It is done.”", "The end."),
    prose("She wrote [sic.] nothing.", "Done."),
    prose("This is **important.**", "Read it."),
    prose("Note the *emphasis*.", "Then continue."),
    prose("He said «Bonjour.»", "Then he left."),
    prose("Paris is the capital of France.[1]", "It is large.[2]"),
    prose("Sentence one.[^1]", "Sentence two."),
    prose("Cite [12].", "Next."),
    prose("It is true (mostly).", "But not always."),
    prose("The answer (e.g. 42) is known.", "Check it."),
    prose("(Note: this is optional.)", "Continue."),
    prose("**Note:** This matters.", "Read on."),
    prose('He asked "why?" and left.', "Nobody answered."),
    # ---------------------------------------------------------------- URLs, e-mail, files
    prose("Go to https://example.com/a.b?x=1.", "Then click."),
    prose("Mail john.doe@mail.example.org for help.", "Thanks."),
    prose("Mail john.doe@mail.example.org.", "Thanks."),
    prose("See www.example.co.uk/page.html for more.", "Bye."),
    prose("Visit [the docs](https://docs.python.org/3.11/).", "It helps."),
    prose("The site x.ai is new.", "It works."),
    prose("Edit the file config.yaml.", "Then restart."),
    # ---------------------------------------------------------------- inline code
    prose("Use `x.y()` here.", "Done."),
    prose("Call `a. B` now.", "Ok."),
    prose("Use ``a`b`` please.", "Ok."),
    prose("A stray ` backtick.", "Next."),
    prose("```js``` is inline.", "Yes."),
    prose("Run `npm install`.", "`npm test` runs the tests."),
    # ---------------------------------------------------------------- misc prose
    prose("Emoji 😀.", "Next."),
    prose("ALL CAPS.", "NEXT ONE."),
    prose("I love NYC.", "The food is great."),
    ("", []),
    ("   ", [(_, "   ")]),
    ("Hello", [(S, "Hello")]),
    ("Hello.  ", [(S, "Hello."), (_, "  ")]),
    ("\n\nHello.", [(_, "\n\n"), (S, "Hello.")]),
    ("Tabs\tinside. Next\tone.", [(S, "Tabs\tinside."), (_, " "), (S, "Next\tone.")]),
    ("Non-breaking\u00a0space. Next.", [(S, "Non-breaking\u00a0space."), (_, " "), (S, "Next.")]),
    ("Line one.\u2028Line two.", [(S, "Line one."), (_, "\u2028"), (S, "Line two.")]),
    # ---------------------------------------------------------------- CJK
    ("这是第一句。这是第二句！对吗？", [(S, "这是第一句。"), (S, "这是第二句！"), (S, "对吗？")]),
    ("他说：「你好。」然后走了。", [(S, "他说：「你好。」"), (S, "然后走了。")]),
    ("日本語です。 English follows.", [(S, "日本語です。"), (_, " "), (S, "English follows.")]),
    # ---------------------------------------------------------------- line breaks
    ("First line\nsecond line.", [(S, "First line\nsecond line.")]),
    ("First sentence.\nSecond sentence.", [(S, "First sentence."), (_, "\n"), (S, "Second sentence.")]),
    ("Para one\n\nPara two", [(S, "Para one"), (_, "\n\n"), (S, "Para two")]),
    ("Ends with colon:\nNext line here", [(S, "Ends with colon:"), (_, "\n"), (S, "Next line here")]),
    ("Trailing.   \n\n  Next.", [(S, "Trailing."), (_, "   \n\n  "), (S, "Next.")]),
    ("Windows line.\r\nNext line.", [(S, "Windows line."), (_, "\r\n"), (S, "Next line.")]),
    ("I met Dr.\nSmith today.", [(S, "I met Dr.\nSmith today.")]),
    ("Hello!\nWorld", [(S, "Hello!"), (_, "\n"), (S, "World")]),
    ("Go now!\nwait, no.", [(S, "Go now!\nwait, no.")]),
    ("A sentence. \n\n\n", [(S, "A sentence."), (_, " \n\n\n")]),
    ("**Summary**\nParis is big.", [(S, "**Summary**"), (_, "\n"), (S, "Paris is big.")]),
    ("**Paris** is in **France**\nand it is big.", [(S, "**Paris** is in **France**\nand it is big.")]),
    ("Title line\n---\nBody.", [(S, "Title line"), (_, "\n---\n"), (S, "Body.")]),
    ("Above\n\n***\n\nBelow", [(S, "Above"), (_, "\n\n***\n\n"), (S, "Below")]),
    ("Soft\nwrapped\nlines here. Next.", [(S, "Soft\nwrapped\nlines here."), (_, " "), (S, "Next.")]),
    # ---------------------------------------------------------------- headings
    ("# Title\nSome text here.", [(H, "# Title"), (_, "\n"), (S, "Some text here.")]),
    ("## Section 2.1\n\nText. More.", [(H, "## Section 2.1"), (_, "\n\n"), (S, "Text."), (_, " "), (S, "More.")]),
    prose("#hashtag is trending.", "Yes."),
    ("Intro text\n### Details\nMore.", [(S, "Intro text"), (_, "\n"), (H, "### Details"), (_, "\n"), (S, "More.")]),
    ("####### Too deep", [(S, "####### Too deep")]),
    ("  # Indented heading  \nText.", [(_, "  "), (H, "# Indented heading"), (_, "  \n"), (S, "Text.")]),
    ("#", [(H, "#")]),
    ("> # Heading in quote", [(_, "> "), (H, "# Heading in quote")]),
    # ---------------------------------------------------------------- lists
    ("- first item\n- second item", [(_, "- "), (S, "first item"), (_, "\n- "), (S, "second item")]),
    (
        "1. Buy milk\n2. Buy eggs.\n3. Go home",
        [(_, "1. "), (S, "Buy milk"), (_, "\n2. "), (S, "Buy eggs."), (_, "\n3. "), (S, "Go home")],
    ),
    (
        "Steps:\n1. Open it.\n2. Close it.",
        [(S, "Steps:"), (_, "\n1. "), (S, "Open it."), (_, "\n2. "), (S, "Close it.")],
    ),
    (
        "* Star item. Second sentence.\n+ Plus item",
        [(_, "* "), (S, "Star item."), (_, " "), (S, "Second sentence."), (_, "\n+ "), (S, "Plus item")],
    ),
    ("- [ ] todo item\n- [x] done item", [(_, "- [ ] "), (S, "todo item"), (_, "\n- [x] "), (S, "done item")]),
    ("- [link](x) item", [(_, "- "), (S, "[link](x) item")]),
    ("• Bullet one\n• Bullet two", [(_, "• "), (S, "Bullet one"), (_, "\n• "), (S, "Bullet two")]),
    ("1) First\n2) Second", [(_, "1) "), (S, "First"), (_, "\n2) "), (S, "Second")]),
    (
        "- Item one\n  continues here.\n- Item two",
        [(_, "- "), (S, "Item one\n  continues here."), (_, "\n- "), (S, "Item two")],
    ),
    ("- Outer\n    - Inner item", [(_, "- "), (S, "Outer"), (_, "\n    - "), (S, "Inner item")]),
    prose("-5 degrees is cold.", "Brr."),
    prose("**Bold** start.", "Next."),
    prose("1.5 million people came.", "Wow."),
    ("**1. Introduction**\nText here.", [(S, "**1. Introduction**"), (_, "\n"), (S, "Text here.")]),
    (
        "1. **Paris**: the capital. It is big.\n2. **Lyon**",
        [(_, "1. "), (S, "**Paris**: the capital."), (_, " "), (S, "It is big."), (_, "\n2. "), (S, "**Lyon**")],
    ),
    ("The answer is\n1. something", [(S, "The answer is"), (_, "\n1. "), (S, "something")]),
    ("-\n- x", [(_, "-\n- "), (S, "x")]),
    # ---------------------------------------------------------------- block quotes
    (
        "> Quoted sentence. Another one.\n> Second line.",
        [(_, "> "), (S, "Quoted sentence."), (_, " "), (S, "Another one."), (_, "\n> "), (S, "Second line.")],
    ),
    ("> - quoted item", [(_, "> - "), (S, "quoted item")]),
    # ---------------------------------------------------------------- tables
    ("| a | b |\n|---|---|\n| 1 | 2 |", [(T, "| a | b |"), (_, "\n"), (T, "|---|---|"), (_, "\n"), (T, "| 1 | 2 |")]),
    ("Table:\n\n| x. y | z |\n\nDone.", [(S, "Table:"), (_, "\n\n"), (T, "| x. y | z |"), (_, "\n\n"), (S, "Done.")]),
    ("Text before\n| a | b |", [(S, "Text before"), (_, "\n"), (T, "| a | b |")]),
    # ---------------------------------------------------------------- code blocks
    ("```\ncode. More code.\n```", [(C, "```\n"), (C, "code. More code.\n"), (C, "```")]),
    (
        "Run this:\n```bash\nls -la\n```\nDone.",
        [(S, "Run this:"), (_, "\n"), (C, "```bash\n"), (C, "ls -la\n"), (C, "```"), (_, "\n"), (S, "Done.")],
    ),
    ("~~~\nx = 1. y = 2.\n~~~", [(C, "~~~\n"), (C, "x = 1. y = 2.\n"), (C, "~~~")]),
    ("````\n```\nnested\n````", [(C, "````\n"), (C, "```\n"), (C, "nested\n"), (C, "````")]),
    ("```python\nprint('hi')", [(C, "```python\n"), (C, "print('hi')")]),
    ("```\n\n```\nAfter.", [(C, "```\n"), (C, "\n"), (C, "```"), (_, "\n"), (S, "After.")]),
    ("  ```\n  indented fence\n  ```", [(_, "  "), (C, "```\n"), (C, "  indented fence\n"), (C, "  ```")]),
    (
        "1. Do:\n   ```sh\n   make\n   ```\n2. Done",
        [(_, "1. "), (S, "Do:"), (_, "\n   "), (C, "```sh\n"), (C, "   make\n"), (C, "   ```"), (_, "\n2. "), (S, "Done")],
    ),
    (
        "Text\n```\n# not a heading\n| not a table |\n```",
        [(S, "Text"), (_, "\n"), (C, "```\n"), (C, "# not a heading\n"), (C, "| not a table |\n"), (C, "```")],
    ),
]
