"""Reference sentences the domain classifier measures questions against.

Generic on purpose: they describe what is NOT a help-centre question for any knowledge base
(small talk, trivia, coding, cooking...). The KB itself defines what is in domain.
"""

GREETINGS = (
    "hello", "hey", "hiya", "greetings", "good day", "good afternoon", "good evening",
    "how are you doing", "how's it going", "thank you", "many thanks", "thanks a lot",
    "bye for now", "goodbye", "see you later", "nice to meet you", "who am I talking to",
    "what is your name", "are you a bot", "are you a real person", "how can you help me",
    "hai", "selamat pagi", "terima kasih", "apa khabar", "cheers", "good night",
    "have a nice day", "you are great", "lol", "okay", "cool",
)

OFF_TOPIC = (
    # general knowledge and trivia
    "Which country has the largest population?", "When was the Eiffel Tower built?",
    "Who painted the Mona Lisa?", "How many planets are in the solar system?",
    "Who is the current president of the United States?", "What language do they speak in Brazil?",
    "Tell me some facts about dinosaurs", "What is the tallest mountain on Earth?",
    # sport, entertainment, weather, travel
    "Which team is top of the Premier League?", "What was the score of last night's game?",
    "Recommend a good movie to watch tonight", "Who sings this song?", "Will it be sunny this weekend?",
    "Is it going to rain later?", "Plan a three-day holiday itinerary for me", "Where can I buy cheap flights?",
    # cooking, health, home, hobbies
    "Give me a recipe for chicken curry", "What should I make for dinner tonight?",
    "How long should I boil an egg?", "What are the symptoms of the flu?", "How can I lose weight quickly?",
    "Suggest an exercise plan to build muscle", "How do I grow vegetables on my balcony?",
    "How do I train my puppy?", "How do I fix a leaking tap?", "How do I learn to play guitar?",
    # writing, language, homework
    "Tell me a joke", "Write a poem about love", "Write a short story about a dragon",
    "Write a product review for my new headphones", "Summarise this article for me",
    "Translate this paragraph into Spanish", "What does this word mean in German?",
    "Help me with my maths homework", "Solve this equation for x", "Write an essay about climate change",
    # programming and technology
    "Write a function that sorts a list in JavaScript", "Why does my Java code throw a null pointer exception?",
    "Explain how neural networks work", "What is the difference between SQL and NoSQL databases?",
    "How do I centre a div in CSS?", "Which laptop should I buy for gaming?", "How do I install Linux?",
    "Explain cloud computing", "How do I stop a running program on my computer?",
    # general finance advice and other institutions
    "Which stocks should I invest in?", "Is now a good time to buy property?",
    "What is the best way to save for retirement?", "How do cryptocurrencies work?",
    "Compare the interest rates of different banks", "How do I get a mortgage from a bank?",
    "How do I open a brokerage account?", "What is inflation?",
    # meta and personal
    "What is the meaning of life?", "Do you have feelings?", "What is your favourite food?",
    "Sing me a song", "Can you be my friend?",
)

#: Well-known other companies and apps: a question about them is not about our KB unless the
#: KB itself mentions them (then they are partners, e.g. a bank you can transfer to).
OTHER_BRANDS = frozenset(
    """maybank cimb rhb ambank hsbc citibank ocbc uob affin alliance bsn agrobank
    grab grabpay boost shopeepay shopee lazada bigpay paypal venmo revolut wise
    alipay wechat gcash paynow paylah setel mae touchngo tng dana ovo gopay
    applepay googlepay samsungpay stripe klarna payoneer skrill binance coinbase
    amazon netflix spotify uber foodpanda airasia gmail yahoo outlook hotmail
    facebook instagram tiktok""".split()
)
